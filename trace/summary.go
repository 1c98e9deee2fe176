package trace

import (
	"fmt"
	"github.com/orwl-go/orwl/trace/internal/units"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

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
	fmt.Fprintf(&b, "trace: %d tasks in %d processes, %s\n", len(s.Tasks), s.Processes, units.Duration(s.Duration))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\trank\tcompute\t\twait\t\ttransfer\t\tbytes\tmost waited on\t")
	for _, ts := range s.Tasks {
		most := "-"
		if ts.MostWaited.Name != "" {
			most = ts.MostWaited.String()
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", ts.Task, ts.Rank,
			units.Duration(ts.Compute), pct(ts.Compute, ts.Span), units.Duration(ts.Wait), pct(ts.Wait, ts.Span),
			units.Duration(ts.Transfer), pct(ts.Transfer, ts.Span), units.Bytes(ts.Bytes), most)
	}
	tw.Flush()
	if len(s.Locations) > 0 {
		fmt.Fprintf(&b, "locations waited on most (of %s waiting in all):\n", units.Duration(s.TotalWait))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, l := range s.Locations {
			fmt.Fprintf(tw, "  %s\t%d waits\t%s\t%s\t\n", l.Loc, l.Waits, units.Duration(l.Total), pct(l.Total, s.TotalWait))
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
