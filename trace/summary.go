package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
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

// Timeline is the per-task view of a trace that the summary, and charts such as package
// gantt's, are made from.
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

// union returns the merged, sorted intervals of ivs.
func union(ivs []Interval) [][2]int64 {
	if len(ivs) == 0 {
		return nil
	}
	s := make([][2]int64, len(ivs))
	for i, iv := range ivs {
		s[i] = [2]int64{iv.Ts, iv.End}
	}
	sort.Slice(s, func(i, j int) bool { return s[i][0] < s[j][0] })
	out := s[:1]
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x[0] <= last[1] {
			if x[1] > last[1] {
				last[1] = x[1]
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

func length(u [][2]int64) int64 {
	var n int64
	for _, x := range u {
		n += x[1] - x[0]
	}
	return n
}

// intersect returns the total length of the intersection of two unions.
func intersect(a, b [][2]int64) int64 {
	var n int64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
		if hi > lo {
			n += hi - lo
		}
		if a[i][1] < b[j][1] {
			i++
		} else {
			j++
		}
	}
	return n
}

// TaskSummary is where one task's time went.
type TaskSummary struct {
	TaskInfo
	Span       time.Duration // from the task's first to its last event
	Compute    time.Duration // in sections, not counting acquire waits nested in them
	Wait       time.Duration // in acquire waits
	Transfer   time.Duration // moving its data (transfer lane; overlaps the others)
	Bytes      int64         // bytes transferred
	MostWaited Loc           // the location it waited on longest (zero if none)
}

// LocationWait is the waiting time spent on one location, over the job.
type LocationWait struct {
	Loc   Loc
	Waits int           // number of acquire waits
	Total time.Duration // their total duration
}

// Summary is the digest of a trace printed at the end of a traced run.
type Summary struct {
	Duration  time.Duration  // from the first to the last event of the trace
	Processes int            // processes with at least one task
	Tasks     []TaskSummary  // ordered by process, then task
	Locations []LocationWait // locations waited on most, longest total first (at most 5)
	TotalWait time.Duration  // all acquire waits of all tasks
	Dropped   int64          // events dropped by event limits
}

// ComputeSummary computes the per-task times of a trace (see [Summary]).
func ComputeSummary(t *Trace) *Summary {
	m := NewTimeline(t)
	s := &Summary{Duration: time.Duration(m.T1 - m.T0), Processes: m.Procs, Dropped: t.Dropped}
	type lw struct {
		n   int
		tot int64
	}
	byLoc := map[Loc]*lw{}
	for _, r := range m.Rows {
		sec, wt, xf := union(r.Sections), union(r.Waits), union(r.Transfers)
		ts := TaskSummary{
			TaskInfo: r.TaskInfo,
			Span:     time.Duration(r.Last - r.First),
			Compute:  time.Duration(length(sec) - intersect(sec, wt)),
			Wait:     time.Duration(length(wt)),
			Transfer: time.Duration(length(xf)),
		}
		for _, x := range r.Transfers {
			ts.Bytes += x.Bytes
		}
		mine := map[Loc]int64{}
		for _, w := range r.Waits {
			d := w.End - w.Ts
			mine[w.Loc] += d
			l := byLoc[w.Loc]
			if l == nil {
				l = &lw{}
				byLoc[w.Loc] = l
			}
			l.n++
			l.tot += d
			s.TotalWait += time.Duration(d)
		}
		var best int64 = -1
		for l, d := range mine {
			if d > best || d == best && lessLoc(l, ts.MostWaited) {
				best, ts.MostWaited = d, l
			}
		}
		s.Tasks = append(s.Tasks, ts)
	}
	for l, w := range byLoc {
		s.Locations = append(s.Locations, LocationWait{Loc: l, Waits: w.n, Total: time.Duration(w.tot)})
	}
	sort.Slice(s.Locations, func(i, j int) bool {
		a, b := s.Locations[i], s.Locations[j]
		if a.Total != b.Total {
			return a.Total > b.Total
		}
		return lessLoc(a.Loc, b.Loc)
	})
	if len(s.Locations) > 5 {
		s.Locations = s.Locations[:5]
	}
	return s
}

func lessLoc(a, b Loc) bool {
	if a.Task != b.Task {
		return a.Task < b.Task
	}
	return a.Name < b.Name
}

// Summarize writes the summary of a trace as a short text table: per task,
// time computing (in sections), waiting (acquire waits) and moving data
// (transfers), each with its share of the task's span, and the locations
// waited on most.
func Summarize(w io.Writer, t *Trace) error {
	return ComputeSummary(t).Write(w)
}

// Write writes the summary as text (see [Summarize]).
func (s *Summary) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace: %d tasks in %d processes, %s\n", len(s.Tasks), s.Processes, FormatDuration(s.Duration))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\trank\tcompute\t\twait\t\ttransfer\t\tbytes\tmost waited on\t")
	for _, ts := range s.Tasks {
		most := "-"
		if ts.MostWaited.Name != "" {
			most = ts.MostWaited.String()
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", ts.Task, ts.Rank,
			FormatDuration(ts.Compute), pct(ts.Compute, ts.Span), FormatDuration(ts.Wait), pct(ts.Wait, ts.Span),
			FormatDuration(ts.Transfer), pct(ts.Transfer, ts.Span), FormatBytes(ts.Bytes), most)
	}
	tw.Flush()
	if len(s.Locations) > 0 {
		fmt.Fprintf(&b, "locations waited on most (of %s waiting in all):\n", FormatDuration(s.TotalWait))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, l := range s.Locations {
			fmt.Fprintf(tw, "  %s\t%d waits\t%s\t%s\t\n", l.Loc, l.Waits, FormatDuration(l.Total), pct(l.Total, s.TotalWait))
		}
		tw.Flush()
	}
	if s.Dropped > 0 {
		fmt.Fprintf(&b, "warning: %d events were dropped by the event limit\n", s.Dropped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(d, of time.Duration) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(d)/float64(of))
}

// num prints v with about 3 significant digits, never in exponent form.
func num(v float64) string {
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%.0f", v)
	case v >= 9.995:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// FormatDuration prints a duration with about 3 significant digits, as the summary does.
func FormatDuration(d time.Duration) string {
	v := float64(d)
	switch {
	case d == 0:
		return "0"
	case v < 1e3:
		return fmt.Sprintf("%dns", d)
	case v < 1e6:
		return num(v/1e3) + "µs"
	case v < 1e9:
		return num(v/1e6) + "ms"
	}
	return num(v/1e9) + "s"
}

// FormatBytes prints a byte count with about 3 significant digits, as the summary does.
func FormatBytes(n int64) string {
	v := float64(n)
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return num(v/(1<<10)) + "KiB"
	case n < 1<<30:
		return num(v/(1<<20)) + "MiB"
	}
	return num(v/(1<<30)) + "GiB"
}
