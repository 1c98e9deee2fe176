package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// interval is a span of a task row, in ns.
type interval struct {
	ts, end int64
	loc     Loc
	mode    string
	bytes   int64
}

// row is everything drawn or summed for one task.
type row struct {
	TaskInfo
	name      string
	sort      int
	sections  []interval
	waits     []interval
	transfers []interval
	first     int64
	last      int64
	seen      bool
}

// model is the per-task view of a trace shared by the SVG and the summary.
type model struct {
	rows     []*row
	procName map[int]string
	procSort map[int]int
	barriers map[int][]interval // by rank
	t0, t1   int64
	locNames []string // distinct location names of sections, sorted
	nprocs   int
}

func buildModel(t *Trace) *model {
	m := &model{procName: map[int]string{}, procSort: map[int]int{}, barriers: map[int][]interval{}}
	type key struct{ pid, task int }
	rows := map[key]*row{}
	get := func(pid, task int) *row {
		r := rows[key{pid, task}]
		if r == nil {
			r = &row{TaskInfo: TaskInfo{Task: task, Rank: pid}, name: fmt.Sprintf("task %d", task), sort: 2 * task}
			rows[key{pid, task}] = r
		}
		return r
	}
	locs := map[string]bool{}
	first := true
	for i := range t.Events {
		e := &t.Events[i]
		if e.Ph == 'M' {
			switch e.Name {
			case "process_name":
				m.procName[e.Pid] = e.Args.Name
			case "process_sort_index":
				m.procSort[e.Pid] = e.Args.SortIndex
			case "thread_name":
				if e.Tid >= 0 && e.Tid < TransferTidBase {
					get(e.Pid, e.Tid).name = e.Args.Name
				}
			case "thread_sort_index":
				if e.Tid >= 0 && e.Tid < TransferTidBase {
					get(e.Pid, e.Tid).sort = e.Args.SortIndex
				}
			}
			continue
		}
		if first || e.Ts < m.t0 {
			m.t0 = e.Ts
		}
		if first || e.End() > m.t1 {
			m.t1 = e.End()
		}
		first = false
		iv := interval{ts: e.Ts, end: e.End(), loc: e.Args.Location(), mode: e.Args.Mode, bytes: e.Args.Bytes}
		switch {
		case e.Tid >= 0 && e.Tid < TransferTidBase:
			r := get(e.Pid, e.Tid)
			if !r.seen || e.Ts < r.first {
				r.first = e.Ts
			}
			if !r.seen || e.End() > r.last {
				r.last = e.End()
			}
			r.seen = true
			if e.Ph != 'X' {
				continue
			}
			switch e.Cat {
			case "section":
				r.sections = append(r.sections, iv)
				locs[iv.loc.Name] = true
			case "wait":
				r.waits = append(r.waits, iv)
			}
		case e.Tid >= TransferTidBase && e.Tid < FIFOTidBase:
			if e.Ph == 'X' && e.Cat == "transfer" {
				r := get(e.Pid, (e.Tid-TransferTidBase)/Lanes)
				r.transfers = append(r.transfers, iv)
			}
		case e.Tid >= ProcessTidBase:
			if e.Ph == 'X' && e.Cat == "barrier" {
				iv.loc.Name = e.Name
				m.barriers[e.Pid] = append(m.barriers[e.Pid], iv)
			}
		}
	}
	procs := map[int]bool{}
	for _, r := range rows {
		m.rows = append(m.rows, r)
		procs[r.Rank] = true
		if _, ok := m.procSort[r.Rank]; !ok {
			m.procSort[r.Rank] = r.Rank // default: by rank
		}
	}
	m.nprocs = len(procs)
	sort.Slice(m.rows, func(i, j int) bool {
		a, b := m.rows[i], m.rows[j]
		if pa, pb := m.procSort[a.Rank], m.procSort[b.Rank]; pa != pb {
			return pa < pb
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.sort != b.sort {
			return a.sort < b.sort
		}
		return a.Task < b.Task
	})
	for n := range locs {
		m.locNames = append(m.locNames, n)
	}
	sort.Strings(m.locNames)
	return m
}

func (m *model) processName(pid int) string {
	if n, ok := m.procName[pid]; ok && n != "" {
		return n
	}
	return fmt.Sprintf("rank %d", pid)
}

// union returns the merged, sorted intervals of ivs.
func union(ivs []interval) [][2]int64 {
	if len(ivs) == 0 {
		return nil
	}
	s := make([][2]int64, len(ivs))
	for i, iv := range ivs {
		s[i] = [2]int64{iv.ts, iv.end}
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
	m := buildModel(t)
	s := &Summary{Duration: time.Duration(m.t1 - m.t0), Processes: m.nprocs, Dropped: t.Dropped}
	type lw struct {
		n   int
		tot int64
	}
	byLoc := map[Loc]*lw{}
	for _, r := range m.rows {
		sec, wt, xf := union(r.sections), union(r.waits), union(r.transfers)
		ts := TaskSummary{
			TaskInfo: r.TaskInfo,
			Span:     time.Duration(r.last - r.first),
			Compute:  time.Duration(length(sec) - intersect(sec, wt)),
			Wait:     time.Duration(length(wt)),
			Transfer: time.Duration(length(xf)),
		}
		for _, x := range r.transfers {
			ts.Bytes += x.bytes
		}
		mine := map[Loc]int64{}
		for _, w := range r.waits {
			d := w.end - w.ts
			mine[w.loc] += d
			l := byLoc[w.loc]
			if l == nil {
				l = &lw{}
				byLoc[w.loc] = l
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
	fmt.Fprintf(&b, "trace: %d tasks in %d processes, %s\n", len(s.Tasks), s.Processes, fmtDur(s.Duration))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\trank\tcompute\t\twait\t\ttransfer\t\tbytes\tmost waited on\t")
	for _, ts := range s.Tasks {
		most := "-"
		if ts.MostWaited.Name != "" {
			most = ts.MostWaited.String()
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", ts.Task, ts.Rank,
			fmtDur(ts.Compute), pct(ts.Compute, ts.Span), fmtDur(ts.Wait), pct(ts.Wait, ts.Span),
			fmtDur(ts.Transfer), pct(ts.Transfer, ts.Span), fmtBytes(ts.Bytes), most)
	}
	tw.Flush()
	if len(s.Locations) > 0 {
		fmt.Fprintf(&b, "locations waited on most (of %s waiting in all):\n", fmtDur(s.TotalWait))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, l := range s.Locations {
			fmt.Fprintf(tw, "  %s\t%d waits\t%s\t%s\t\n", l.Loc, l.Waits, fmtDur(l.Total), pct(l.Total, s.TotalWait))
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

// fmtDur prints a duration with about 3 significant digits.
func fmtDur(d time.Duration) string {
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

func fmtBytes(n int64) string {
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
