package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/orwl"
)

// logRecords collects the messages of the records a job logs.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
	// complete is closed at the first "orwl: checkpoint complete".
	complete chan struct{}
	once     sync.Once
}

func newLogRecords() *logRecords { return &logRecords{complete: make(chan struct{})} }

func (l *logRecords) logger() *slog.Logger {
	return slog.New(logHandler(func(r slog.Record) {
		l.mu.Lock()
		l.msgs = append(l.msgs, r.Message)
		l.mu.Unlock()
		if r.Message == "orwl: checkpoint complete" {
			l.once.Do(func() { close(l.complete) })
		}
	}))
}

// matching returns the messages that contain s.
func (l *logRecords) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// errDone stops a task's Iterate; the task then returns nil.
var errDone = errors.New("done")

// counting is a job of independent tasks that count their iterations in a kept state (a
// file, not in the manifest) until stop says so: the task then ends without error, or, when
// fail is set, fails the job. It records the iteration each task resumed at.
type counting struct {
	dir     string
	fail    bool
	stop    func(iter int) bool
	mu      sync.Mutex
	resumed map[int]int
}

func (c *counting) config(log *slog.Logger) orwl.Config {
	return orwl.Config{Tasks: 2, Locations: []string{"v"}, Logger: log,
		Checkpoint: orwl.Checkpoint{Dir: c.dir, Every: 2e6, Program: "counting"}}
}

func (c *counting) task(ctx context.Context, t *orwl.Task) error {
	count := make([]byte, 8+checkpoint.InlineMax)
	t.Keep("count", count)
	t.Scale("v", 8)
	own := t.WriteInsert(t.Loc(t.ID(), "v"), 0)
	if err := t.Schedule(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.resumed[t.ID()] = t.Resumed()
	c.mu.Unlock()
	n := orwl.Float64s(count)
	err := t.Iterate(ctx, math.MaxInt32, func(iter int) error {
		if n[0] != float64(iter) {
			return fmt.Errorf("task %d: %v iterations counted at iteration %d", t.ID(), n[0], iter)
		}
		if c.stop(iter) {
			return errDone
		}
		n[0]++
		return own.Section(ctx, func([]byte) error { return nil })
	})
	if errors.Is(err, errDone) && !c.fail {
		return nil
	}
	return err
}

// run runs the job in this process until a checkpoint is complete, then ends it.
func (c *counting) run(t *testing.T) (*logRecords, error) {
	t.Helper()
	logs := newLogRecords()
	c.resumed = map[int]int{}
	c.stop = func(int) bool {
		select {
		case <-logs.complete:
			return true
		default:
			return false
		}
	}
	return logs, orwl.Run(context.Background(), c.config(logs.logger()), c.task)
}

// TestFinishedJobRunAgainStartsAfresh: the checkpoints of a job that finished are marked
// so; the same job run again on the directory starts from iteration 0 and says why,
// instead of resuming from its last checkpoint and ending at once. A run that starts
// afresh there and fails after a checkpoint of its own resumes from that one.
func TestFinishedJobRunAgainStartsAfresh(t *testing.T) {
	c := &counting{dir: memDir(t)}
	if _, err := c.run(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	logs, err := c.run(t)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if c.resumed[0] != 0 || c.resumed[1] != 0 {
		t.Fatalf("the finished job run again resumed at iterations %v, want 0", c.resumed)
	}
	if said := logs.matching("finished"); len(said) != 1 || !strings.Contains(said[0], "afresh") {
		t.Fatalf("the run again said %q about the finished job's checkpoints, want one line saying it starts afresh", said)
	}
	c.fail = true
	if _, err := c.run(t); !errors.Is(err, errDone) {
		t.Fatalf("third run: %v, want its failure", err)
	}
	c.fail = false
	if logs, err = c.run(t); err != nil {
		t.Fatalf("fourth run: %v", err)
	}
	if c.resumed[0] == 0 || len(logs.matching("finished")) != 0 {
		t.Fatalf("the run after a failed one resumed at %v and said %q, want its checkpoint and nothing of a finished job",
			c.resumed, logs.matching("finished"))
	}
}

// TestCheckpointsWithoutIterateWarnOnce: a job that takes checkpoints and whose tasks never
// run Task.Iterate can take none; rank 0 says so once for the whole job, naming why, when
// the job ends. A job where only a task of another process iterates says nothing.
func TestCheckpointsWithoutIterateWarnOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		iterates func(task int) bool
		want     int
	}{
		{"no task iterates", func(int) bool { return false }, 1},
		{"task 1 of rank 1 iterates", func(task int) bool { return task == 1 }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := []*logRecords{newLogRecords(), newLogRecords()}
			dir := memDir(t)
			config := func(rank int) orwl.Config {
				return orwl.Config{Tasks: 2, Locations: []string{"v"}, Logger: logs[rank].logger(),
					Checkpoint: orwl.Checkpoint{Dir: dir, Program: "plain"}}
			}
			errs := runEachProc(t, context.Background(), 2, config, func(ctx context.Context, t *orwl.Task) error {
				t.Scale("v", 8)
				own := t.WriteInsert(t.Loc(t.ID(), "v"), 0)
				if err := t.Schedule(ctx); err != nil {
					return err
				}
				if c.iterates(t.ID()) {
					return t.Iterate(ctx, 3, func(int) error { return own.Section(ctx, func([]byte) error { return nil }) })
				}
				for range 3 {
					if err := own.Section(ctx, func([]byte) error { return nil }); err != nil {
						return err
					}
				}
				return nil
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			said := logs[0].matching("Task.Iterate")
			if len(said) != c.want || len(logs[1].matching("Task.Iterate")) != 0 {
				t.Fatalf("rank 0 said %q, rank 1 %q; want %d warning from rank 0 alone", said, logs[1].matching("Task.Iterate"), c.want)
			}
			if c.want > 0 && !strings.Contains(said[0], "no checkpoint") {
				t.Fatalf("the warning %q does not say that no checkpoint was taken", said[0])
			}
		})
	}
}

// TestFullDiskReportedOncePerJob: a full disk that fails the pieces of every process is
// reported once for the whole job, by rank 0, naming the rank, not once per process; the
// job goes on.
func TestFullDiskReportedOncePerJob(t *testing.T) {
	var mu sync.Mutex
	first := 0                   // the first checkpoint whose pieces failed
	later := make(chan struct{}) // closed when a piece of a later one is written: the first was given up everywhere
	var once sync.Once
	defer orwl.SetPieceFault(func(k, task int) error {
		mu.Lock()
		defer mu.Unlock()
		if first == 0 {
			first = k
		} else if k > first {
			once.Do(func() { close(later) })
		}
		return fmt.Errorf("writing: %w", checkpoint.ErrNoSpace)
	})()
	logs := []*logRecords{newLogRecords(), newLogRecords()}
	dir := memDir(t)
	config := func(rank int) orwl.Config {
		return orwl.Config{Tasks: 2, Locations: []string{"v"}, Logger: logs[rank].logger(),
			Checkpoint: orwl.Checkpoint{Dir: dir, Every: 2e6, Program: "full"}}
	}
	errs := runEachProc(t, context.Background(), 2, config, func(ctx context.Context, t *orwl.Task) error {
		t.Keep("s", make([]byte, 4096)) // a file: not in the manifest
		t.Scale("v", 8)
		own := t.WriteInsert(t.Loc(t.ID(), "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		err := t.Iterate(ctx, math.MaxInt32, func(int) error {
			select {
			case <-later:
				return errDone
			default:
			}
			return own.Section(ctx, func([]byte) error { return nil })
		})
		if errors.Is(err, errDone) {
			return nil
		}
		return err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	said := append(logs[0].matching("not written"), logs[1].matching("not written")...)
	if len(said) != 1 || len(logs[0].matching("not written")) != 1 || !strings.Contains(said[0], "disk full") || !strings.Contains(said[0], "rank ") {
		t.Fatalf("the job said %q, want one line from rank 0 about the full disk", said)
	}
}
