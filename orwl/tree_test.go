package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/orwl"
	"github.com/orwl-go/orwl/trace"
)

// wideLog keeps, by rank, the counts of job-wide messages that each process logs at the
// end of its job ("orwl: job-wide messages").
type wideLog struct {
	mu             sync.Mutex
	sent, received []map[string]int64
}

func newWideLog(procs int) *wideLog {
	w := &wideLog{sent: make([]map[string]int64, procs), received: make([]map[string]int64, procs)}
	for r := range procs {
		w.sent[r], w.received[r] = map[string]int64{}, map[string]int64{}
	}
	return w
}

// logger returns the logger of rank's process.
func (w *wideLog) logger(rank int) *slog.Logger { return slog.New(&wideHandler{w: w, rank: rank}) }

// wideHandler records the counts of one process.
type wideHandler struct {
	w    *wideLog
	rank int
}

func (h *wideHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *wideHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *wideHandler) WithGroup(string) slog.Handler            { return h }

func (h *wideHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "orwl: job-wide messages" {
		return nil
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		into := map[string]map[string]int64{"sent": h.w.sent[h.rank], "received": h.w.received[h.rank]}[a.Key]
		if into != nil {
			for _, c := range a.Value.Group() {
				into[c.Key] = int64(c.Value.Uint64())
			}
		}
		return true
	})
	return nil
}

// runCounted runs a job of procs processes in this process, one task each, and returns
// each rank's error and the job-wide messages each one counted.
func runCounted(t *testing.T, procs int, locations []string, fn orwl.TaskFunc) ([]error, *wideLog) {
	t.Helper()
	w := newWideLog(procs)
	errs := runEachProc(t, context.Background(), procs, func(rank int) orwl.Config {
		return orwl.Config{Tasks: procs, Locations: locations, Logger: w.logger(rank)}
	}, fn)
	return errs, w
}

// TestFailureSpreadsAlongTheTree: a failure of one process of 16 reaches every other one,
// naming the process and its error, while no process sends more than one failure message
// per neighbour in the job's tree (3), where each used to send one to every other process.
// The failing task fails once every other task has read its location x: all of them are
// past the schedule.
func TestFailureSpreadsAlongTheTree(t *testing.T) {
	const procs, failing = 16, 5
	errs, counts := runCounted(t, procs, []string{"x"}, func(ctx context.Context, task *orwl.Task) error {
		x := task.Loc(failing, "x")
		if task.ID() == failing {
			w := task.WriteInsert(x, 1)
			if err := task.Schedule(ctx); err != nil {
				return err
			}
			if err := w.Acquire(ctx); err != nil {
				return err
			}
			return errors.New("boom")
		}
		r := task.ReadInsert(x, 0)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if err := r.Section(ctx, func([]byte) error { return nil }); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	for r, err := range errs {
		want := fmt.Sprintf("orwl: rank %d failed: boom", failing)
		if r == failing {
			want = "boom"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: Run returned %v, want %q", r, err, want)
		}
	}
	var total int64
	for r := range procs {
		n := counts.sent[r]["fail"]
		total += n
		if n > 3 {
			t.Errorf("rank %d sent %d failure messages, want at most 3 (its neighbours in the tree)", r, n)
		}
	}
	t.Logf("failure messages sent: %d in all, by %d processes", total, procs)
}

// ringOfBlocks breaks the discipline along a ring of 16 tasks: each task holds its own
// block and waits for the next task's.
func ringOfBlocks(ctx context.Context, task *orwl.Task) error {
	next := (task.ID() + 1) % 16
	mine := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
	theirs := task.WriteInsert(task.Loc(next, "block"), 1)
	if err := task.Schedule(ctx); err != nil {
		return err
	}
	return mine.Section(ctx, func([]byte) error {
		return theirs.Section(ctx, func([]byte) error { return nil })
	})
}

// TestDeadlockReportsGatherAlongTheTree: a deadlock around 16 processes is found and
// named, and rank 0 receives the reports of the stuck processes merged by its children in
// the tree: a few messages from each, where it used to receive two rounds at least from
// every other process.
func TestDeadlockReportsGatherAlongTheTree(t *testing.T) {
	const procs = 16
	errs, counts := runCounted(t, procs, []string{"block"}, ringOfBlocks)
	for r, err := range errs {
		wantErr(t, err, orwl.ErrDeadlock, `task 15 waits to write task 0 "block" (position 1), held by task 0`)
		if t.Failed() {
			t.Fatalf("rank %d", r)
		}
	}
	got := counts.received[0]["stuck"]
	t.Logf("rank 0 received %d deadlock reports; sent by rank: %v", got, sentBy(counts, "stuck"))
	if got >= procs-1 {
		t.Errorf("rank 0 received %d deadlock reports, want fewer than one from each other process (%d)", got, procs-1)
	}
}

// sentBy lists how many messages of kind each rank sent.
func sentBy(w *wideLog, kind string) []int64 {
	var n []int64
	for _, s := range w.sent {
		n = append(n, s[kind])
	}
	return n
}

// TestTraceGathersAlongTheTree: the trace parts of 7 processes reach rank 0 merged by the
// interior processes of the tree, one message from each of rank 0's children, and the
// trace holds every process's task.
func TestTraceGathersAlongTheTree(t *testing.T) {
	const procs = 7
	file := filepath.Join(t.TempDir(), "job.json")
	w := newWideLog(procs)
	errs := runEachProc(t, context.Background(), procs, func(rank int) orwl.Config {
		return orwl.Config{Tasks: procs, Locations: []string{"x"}, Logger: w.logger(rank), Trace: file}
	}, func(ctx context.Context, task *orwl.Task) error {
		prev := (task.ID() + procs - 1) % procs
		mine := task.WriteInsert(task.Loc(task.ID(), "x"), 0)
		theirs := task.ReadInsert(task.Loc(prev, "x"), 1)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if err := mine.Section(ctx, func([]byte) error { return nil }); err != nil {
			return err
		}
		return theirs.Section(ctx, func([]byte) error { return nil })
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Parse(data) // not validated: the processes share one clock, measured apart
	if err != nil {
		t.Fatal(err)
	}
	ranks := map[int]bool{}
	for _, info := range tr.Tasks() {
		ranks[info.Rank] = true
	}
	if len(ranks) != procs || len(tr.Tasks()) != procs {
		t.Errorf("the merged trace has tasks %v, want %d tasks from %d processes", tr.Tasks(), procs, procs)
	}
	if got := w.received[0]["trace"]; got != 2 {
		t.Errorf("rank 0 received %d trace messages, want 2 (one from each child); sent by rank: %v", got, sentBy(w, "trace"))
	}
}

// TestScheduleProblemsGatherAlongTheTree: the insert mistakes of tasks of two of 16
// processes reach every task, the same text everywhere, while each process sends at most
// one message of them to each neighbour in the tree (up to its parent, down to its
// children), where each used to send one to every other process.
func TestScheduleProblemsGatherAlongTheTree(t *testing.T) {
	const procs = 16
	errs, counts := runCounted(t, procs, []string{"x"}, func(ctx context.Context, task *orwl.Task) error {
		switch task.ID() {
		case 4:
			task.ReadInsert(task.Loc(99, "x"), 0)
		case 13:
			task.WriteInsert(task.Loc(1, "y"), 0)
		}
		return task.Schedule(ctx)
	})
	for r, err := range errs {
		if err == nil || err.Error() != errs[0].Error() {
			t.Fatalf("rank %d: %v, rank 0: %v; want the same error", r, err, errs[0])
		}
	}
	for _, want := range []string{`task 4: read insert on task 99 "x"`, `task 13: write insert on task 1 "y"`} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("error lacks %q: %v", want, errs[0])
		}
	}
	for r := range procs {
		if n := counts.sent[r]["problems"]; n > 3 {
			t.Errorf("rank %d sent %d messages of insert mistakes, want at most 3 (its neighbours in the tree)", r, n)
		}
	}
	t.Logf("messages of insert mistakes sent by rank: %v", sentBy(counts, "problems"))
}
