package trace

import (
	"fmt"
	"sort"
)

// Interval is one span of a task's row, in ns of the trace's clock.
type Interval struct {
	Ts, End int64
	Loc     Loc    // the location it concerns
	Mode    string // "read" or "write", for sections and waits
	Bytes   int64  // bytes moved, for transfers
}

// Row is everything a trace says of one task: its sections, its acquire waits and its data
// transfers.
type Row struct {
	TaskInfo
	Name        string // the task's track name
	Sort        int    // its place among the tasks of its process
	Sections    []Interval
	Waits       []Interval
	Transfers   []Interval
	First, Last int64 // its first and last event
	seen        bool
}

// Timeline is the per-task view of a trace: what [Summarize] and package gantt's chart are
// made from, and what another view of a trace starts from. Times are in ns of the trace's
// clock.
type Timeline struct {
	Rows     []*Row             // ordered by process, then task
	ProcName map[int]string     // by rank
	ProcSort map[int]int        // by rank
	Barriers map[int][]Interval // by rank; Loc.Name is the barrier's name
	T0, T1   int64              // the first and last instants of the trace
	LocNames []string           // distinct location names of sections, sorted
	Procs    int                // processes with at least one task
}

// NewTimeline sorts the events of t into rows, one per task.
func NewTimeline(t *Trace) *Timeline {
	b := timelineBuilder{
		m:    &Timeline{ProcName: map[int]string{}, ProcSort: map[int]int{}, Barriers: map[int][]Interval{}},
		rows: map[[2]int]*Row{},
		locs: map[string]bool{},
	}
	for i := range t.Events {
		if e := &t.Events[i]; e.Ph == 'M' {
			b.meta(e)
		} else {
			b.add(e)
		}
	}
	return b.finish()
}

// timelineBuilder gathers a Timeline's rows, by process and task, from the events.
type timelineBuilder struct {
	m     *Timeline
	rows  map[[2]int]*Row // by pid and task
	locs  map[string]bool // the names of the locations of sections
	begun bool            // an event has set T0 and T1
}

// row returns task's row in process pid, making it on first use.
func (b *timelineBuilder) row(pid, task int) *Row {
	r := b.rows[[2]int{pid, task}]
	if r == nil {
		r = &Row{TaskInfo: TaskInfo{Task: task, Rank: pid}, Name: fmt.Sprintf("task %d", task), Sort: 2 * task}
		b.rows[[2]int{pid, task}] = r
	}
	return r
}

// meta records a metadata event: a process's or a task's name or place.
func (b *timelineBuilder) meta(e *Event) {
	task := e.Tid >= 0 && e.Tid < TransferTidBase
	switch {
	case e.Name == "process_name":
		b.m.ProcName[e.Pid] = e.Args.Name
	case e.Name == "process_sort_index":
		b.m.ProcSort[e.Pid] = e.Args.SortIndex
	case e.Name == "thread_name" && task:
		b.row(e.Pid, e.Tid).Name = e.Args.Name
	case e.Name == "thread_sort_index" && task:
		b.row(e.Pid, e.Tid).Sort = e.Args.SortIndex
	}
}

// add records an event on its task's row, transfer lane or process track.
func (b *timelineBuilder) add(e *Event) {
	if !b.begun || e.Ts < b.m.T0 {
		b.m.T0 = e.Ts
	}
	if !b.begun || e.End() > b.m.T1 {
		b.m.T1 = e.End()
	}
	b.begun = true
	iv := Interval{Ts: e.Ts, End: e.End(), Loc: e.Args.Location(), Mode: e.Args.Mode, Bytes: e.Args.Bytes}
	switch {
	case e.Tid >= 0 && e.Tid < TransferTidBase:
		b.addTask(e, iv)
	case e.Tid >= TransferTidBase && e.Tid < FIFOTidBase && e.Ph == 'X' && e.Cat == "transfer":
		r := b.row(e.Pid, (e.Tid-TransferTidBase)/Lanes)
		r.Transfers = append(r.Transfers, iv)
	case e.Tid >= ProcessTidBase && e.Ph == 'X' && e.Cat == "barrier":
		iv.Loc.Name = e.Name
		b.m.Barriers[e.Pid] = append(b.m.Barriers[e.Pid], iv)
	}
}

// addTask records an event of a task's own row: its extent, and its sections and waits.
func (b *timelineBuilder) addTask(e *Event, iv Interval) {
	r := b.row(e.Pid, e.Tid)
	if !r.seen || e.Ts < r.First {
		r.First = e.Ts
	}
	if !r.seen || e.End() > r.Last {
		r.Last = e.End()
	}
	r.seen = true
	switch {
	case e.Ph != 'X':
	case e.Cat == "section":
		r.Sections = append(r.Sections, iv)
		b.locs[iv.Loc.Name] = true
	case e.Cat == "wait":
		r.Waits = append(r.Waits, iv)
	}
}

// finish orders the rows (by process, then task) and the location names.
func (b *timelineBuilder) finish() *Timeline {
	m := b.m
	procs := map[int]bool{}
	for _, r := range b.rows {
		m.Rows = append(m.Rows, r)
		procs[r.Rank] = true
		if _, ok := m.ProcSort[r.Rank]; !ok {
			m.ProcSort[r.Rank] = r.Rank // default: by rank
		}
	}
	m.Procs = len(procs)
	sort.Slice(m.Rows, func(i, j int) bool {
		a, b := m.Rows[i], m.Rows[j]
		if pa, pb := m.ProcSort[a.Rank], m.ProcSort[b.Rank]; pa != pb {
			return pa < pb
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Sort != b.Sort {
			return a.Sort < b.Sort
		}
		return a.Task < b.Task
	})
	for n := range b.locs {
		m.LocNames = append(m.LocNames, n)
	}
	sort.Strings(m.LocNames)
	return m
}

// ProcessName is the name of process pid in the trace, or "rank pid".
func (m *Timeline) ProcessName(pid int) string {
	if n, ok := m.ProcName[pid]; ok && n != "" {
		return n
	}
	return fmt.Sprintf("rank %d", pid)
}
