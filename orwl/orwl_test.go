package orwl_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orwl-go/orwl/orwl"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(scenarioEnv); name != "" { // a process of a multi-process test
		os.Exit(runScenario(name))
	}
	goleak.VerifyTestMain(m)
}

var twoLocs = []string{"block", "bound"}

// run runs fn as every task of a job of n tasks with the locations block and bound.
func run(t *testing.T, n int, fn orwl.TaskFunc) error {
	t.Helper()
	return orwl.Run(context.Background(), orwl.Config{Tasks: n, Locations: twoLocs}, fn)
}

func wantErr(t *testing.T, err error, target error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", words)
	}
	if target != nil && !errors.Is(err, target) {
		t.Errorf("error %q does not match %v", err, target)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	noop := func(context.Context, *orwl.Task) error { return nil }
	for _, tc := range []struct {
		cfg  orwl.Config
		want string
	}{
		{orwl.Config{Tasks: 0, Locations: twoLocs}, "Config.Tasks is 0"},
		{orwl.Config{Tasks: 2}, "Config.Locations is empty"},
		{orwl.Config{Tasks: 2, Locations: []string{"a", ""}}, "Config.Locations[1] is empty"},
		{orwl.Config{Tasks: 2, Locations: []string{"a", "a"}}, `names "a" twice`},
		{orwl.Config{Tasks: 1 << 40, Locations: twoLocs}, "a job has at most"},
		{orwl.Config{Tasks: 1 << 23, Locations: []string{"a", "b", "c"}}, "with 3 locations each: a job has at most 16777216 locations"},
	} {
		wantErr(t, orwl.Run(context.Background(), tc.cfg, noop), nil, tc.want)
	}
}

// TestMisuse checks rule 9: every misuse is an error naming task, location and position.
func TestMisuse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		use    func(ctx context.Context, h *orwl.Handle) error
		target error
		words  []string
	}{
		{"release without acquire", func(ctx context.Context, h *orwl.Handle) error { return h.Release() },
			orwl.ErrNotHeld, []string{"task 0", "release", `task 0 "block"`, "position 0"}},
		{"acquire twice", func(ctx context.Context, h *orwl.Handle) error {
			if err := h.Acquire(ctx); err != nil {
				return err
			}
			defer h.Release()
			return h.Acquire(ctx)
		}, orwl.ErrHeld, []string{"acquire", "already acquired"}},
		{"resize through a read handle", nil, orwl.ErrReadOnly, []string{"resize", "read handle"}},
		{"negative resize", func(ctx context.Context, h *orwl.Handle) error {
			return h.Section(ctx, func([]byte) error { _, err := h.Resize(-1); return err })
		}, orwl.ErrNegativeSize, []string{"resize", "-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
				w := task.WriteInsert(task.Loc(0, "block"), 0)
				r := task.ReadInsert(task.Loc(0, "bound"), 0)
				if err := task.Schedule(ctx); err != nil {
					return err
				}
				if tc.use == nil { // resize through the read handle
					return r.Section(ctx, func([]byte) error { _, err := r.Resize(8); return err })
				}
				return tc.use(ctx, w)
			})
			wantErr(t, err, tc.target, tc.words...)
		})
	}
}

func TestMapOutsideSectionIsNil(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		task.Scale("block", 16)
		h := task.WriteInsert(task.Loc(0, "block"), 0)
		if h.Map() != nil {
			t.Error("Map before the schedule is not nil")
		}
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if h.Map() != nil {
			t.Error("Map before Acquire is not nil")
		}
		if err := h.Section(ctx, func(b []byte) error {
			if len(b) != 16 {
				t.Errorf("mapped %d bytes, want 16", len(b))
			}
			return nil
		}); err != nil {
			return err
		}
		if h.Map() != nil {
			t.Error("Map after Release is not nil")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInsertMistakesReachEveryTask checks rule 10: inserts never fail on the spot, Schedule
// returns every mistake of every task, joined, to every task.
func TestInsertMistakesReachEveryTask(t *testing.T) {
	scheduleErrs := make([]error, 3)
	err := run(t, 3, func(ctx context.Context, task *orwl.Task) error {
		switch task.ID() {
		case 0:
			task.ReadInsert(task.Loc(7, "bound"), 0)
			task.Scale("block", -8)
		case 1:
			task.WriteInsert(task.Loc(0, "nope"), 1)
			task.ReadInsert(task.Loc(1, "block"), -2)
			task.Scale("other", 8)
		}
		scheduleErrs[task.ID()] = task.Schedule(ctx)
		return scheduleErrs[task.ID()]
	})
	words := []string{
		`task 0: read insert on task 7 "bound" at position 0: no task 7: the job has 3 tasks`,
		`task 0: Scale("block", -8): negative size -8`,
		`task 1: write insert on task 0 "nope" at position 1: no location named "nope"`,
		`task 1: read insert on task 1 "block" at position -2: negative FIFO position -2`,
		`task 1: Scale("other", 8): no location named "other"`,
	}
	wantErr(t, err, nil, words...)
	for id, e := range scheduleErrs {
		if e == nil || e.Error() != scheduleErrs[0].Error() {
			t.Errorf("task %d: Schedule returned %v, want the same error as task 0", id, e)
		}
	}
}

func TestMistakesAfterSchedule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		do    func(ctx context.Context, task *orwl.Task) error
		words []string
	}{
		{"insert after Schedule", func(ctx context.Context, task *orwl.Task) error {
			return task.ReadInsert(task.Loc(0, "block"), 0).Acquire(ctx)
		}, []string{"insert after Schedule", "use ReadRequest"}},
		{"Scale after Schedule", func(ctx context.Context, task *orwl.Task) error {
			task.Scale("block", 8)
			return nil
		}, []string{`Scale("block", 8): called after Schedule`}},
		{"Schedule twice", func(ctx context.Context, task *orwl.Task) error {
			return task.Schedule(ctx)
		}, []string{"Schedule called twice"}},
		{"request of a missing task", func(ctx context.Context, task *orwl.Task) error {
			_, err := task.WriteRequest(task.Loc(-1, "block"))
			return err
		}, []string{`write request on task -1 "block": no task -1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
				if err := task.Schedule(ctx); err != nil {
					return err
				}
				return tc.do(ctx, task)
			})
			wantErr(t, err, nil, tc.words...)
		})
	}
}

func TestRequestBeforeSchedule(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		_, err := task.ReadRequest(task.Loc(0, "block"))
		return err
	})
	wantErr(t, err, nil, "request before Schedule")
}

// TestFinishedTaskReleases checks rule 8: a task that returns holding a grant and with
// requests queued does not make others wait.
func TestFinishedTaskReleases(t *testing.T) {
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsert(task.Loc(0, "block"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 {
			return w.Acquire(ctx) // returns holding the grant, with the next one queued
		}
		for range 3 {
			if err := w.Section(ctx, func([]byte) error { return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTaskWithoutScheduleArrivesEmpty(t *testing.T) {
	err := run(t, 3, func(ctx context.Context, task *orwl.Task) error {
		h := task.WriteInsert(task.Loc(0, "block"), task.ID())
		if task.ID() == 1 {
			return nil // never calls Schedule: its insert is dropped
		}
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		return h.Section(ctx, func([]byte) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFirstErrorCancelsOthers(t *testing.T) {
	boom := errors.New("boom")
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		if task.ID() == 0 {
			return boom
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want boom", err)
	}
}

func TestPanicBecomesError(t *testing.T) {
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		h := task.WriteInsert(task.Loc(0, "block"), 0)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		return h.Section(ctx, func([]byte) error {
			if task.ID() == 0 {
				panic("kaboom")
			}
			return nil
		})
	})
	wantErr(t, err, nil, "task 0 panicked: kaboom")
}

func TestCancelledAcquireClosesHandle(t *testing.T) {
	tried := make(chan struct{})
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsert(task.Loc(0, "block"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 { // holds the grant until task 1 has given up
			return w.Section(ctx, func([]byte) error { <-tried; return nil })
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Acquire(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("acquire with a cancelled context: %v", err)
		}
		close(tried)
		if err := w.Acquire(ctx); !errors.Is(err, orwl.ErrClosed) {
			t.Errorf("acquire after cancellation: %v, want ErrClosed", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// crossing breaks the discipline (for two tasks): each task holds its own block and waits
// for the other's, nesting sections of different positions.
func crossing(ctx context.Context, task *orwl.Task) error {
	other := 1 - task.ID()
	mine := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
	theirs := task.WriteInsert(task.Loc(other, "block"), 1)
	if err := task.Schedule(ctx); err != nil {
		return err
	}
	return mine.Section(ctx, func([]byte) error {
		return theirs.Section(ctx, func([]byte) error { return nil })
	})
}

func TestDeadlockIsReported(t *testing.T) {
	err := run(t, 2, crossing)
	var dl *orwl.DeadlockError
	if !errors.As(err, &dl) || !errors.Is(err, orwl.ErrDeadlock) {
		t.Fatalf("Run returned %v, want a DeadlockError", err)
	}
	wantErr(t, err, orwl.ErrDeadlock,
		`task 0 waits to write task 1 "block" (position 1), held by task 1`,
		`task 1 waits to write task 0 "block" (position 1), held by task 0`)
	if len(dl.Cycle) != 2 {
		t.Errorf("cycle %v, want 2 waits", dl.Cycle)
	}
}

func TestSelfDeadlockIsReported(t *testing.T) {
	err := run(t, 1, func(ctx context.Context, task *orwl.Task) error {
		w := task.WriteInsert(task.Loc(0, "block"), 0)
		r := task.ReadInsert(task.Loc(0, "block"), 1)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		// Reads at position 1 while holding the write of position 0: waits for itself.
		return w.Section(ctx, func([]byte) error { return r.Section(ctx, func([]byte) error { return nil }) })
	})
	wantErr(t, err, orwl.ErrDeadlock, `task 0 waits to read task 0 "block" (position 1), held by task 0`)
}

func TestResizeKeepsPrefix(t *testing.T) {
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		var w *orwl.Handle
		if task.ID() == 0 {
			task.Scale("block", 8)
			w = task.WriteInsertOnce(task.Loc(0, "block"), 0)
		}
		r := task.ReadInsertOnce(task.Loc(0, "block"), 1)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 {
			if err := r.Close(); err != nil {
				return err
			}
			return w.Section(ctx, func(b []byte) error {
				orwl.Float64s(b)[0] = 2.5
				b, err := w.Resize(24)
				if err != nil {
					return err
				}
				orwl.Float64s(b)[2] = 7
				return nil
			})
		}
		return r.Section(ctx, func(b []byte) error {
			got := orwl.Float64s(b)
			if len(got) != 3 || got[0] != 2.5 || got[1] != 0 || got[2] != 7 {
				t.Errorf("reader sees %v, want [2.5 0 7]", got)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDynamicRequestsAfterSchedule(t *testing.T) {
	var order []int
	err := run(t, 3, func(ctx context.Context, task *orwl.Task) error {
		init := task.WriteInsertOnce(task.Loc(0, "bound"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		// The one-shot inserts are ordered by task id; each then queues a dynamic write at the
		// tail while it holds, so the dynamic ones follow in the same order.
		var next *orwl.Handle
		if err := init.Section(ctx, func([]byte) error {
			order = append(order, task.ID())
			var err error
			next, err = task.WriteRequest(task.Loc(0, "bound"))
			return err
		}); err != nil {
			return err
		}
		if init.Test() {
			t.Error("Test of a used one-shot handle reports a grant")
		}
		return next.Section(ctx, func([]byte) error { order = append(order, 10+task.ID()); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 10, 11, 12}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// TestUncontendedLoopSeesItsContextEnd: a task that loops on sections of an iterative handle
// nobody else uses (always granted at once) still sees its context end when another task
// fails, so Run returns.
func TestUncontendedLoopSeesItsContextEnd(t *testing.T) {
	boom := errors.New("boom")
	err := run(t, 2, func(ctx context.Context, task *orwl.Task) error {
		h := task.WriteInsert(task.Loc(task.ID(), "block"), 0)
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 1 {
			return boom
		}
		for {
			if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
				return err
			}
		}
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want boom", err)
	}
}

// TestReRequestedHandleEndsWithItsTask: a one-shot handle requested again after many
// dynamic requests is still released or cancelled when its task returns (rule 8 for every
// handle a task ever made), so the task queued behind it goes on.
func TestReRequestedHandleEndsWithItsTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := orwl.Run(ctx, orwl.Config{Tasks: 2, Locations: twoLocs}, func(ctx context.Context, task *orwl.Task) error {
		if task.ID() == 0 {
			task.Scale("bound", 8)
		}
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		bound := task.Loc(0, "bound")
		if task.ID() == 1 {
			for last := 0.0; last >= 0; {
				w, err := task.WriteRequest(bound)
				if err != nil {
					return err
				}
				if err := w.Section(ctx, func(b []byte) error { last = orwl.Float64s(b)[0]; return nil }); err != nil {
					return err
				}
			}
			return nil
		}
		var kept *orwl.Handle
		for i := range 200 {
			h, err := task.ReadRequest(bound)
			if err != nil {
				return err
			}
			if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
				return err
			}
			if i == 3 {
				kept = h
			}
		}
		w, err := task.WriteRequest(bound)
		if err != nil {
			return err
		}
		if err := w.Section(ctx, func(b []byte) error { orwl.Float64s(b)[0] = -1; return nil }); err != nil {
			return err
		}
		return kept.Request() // queued again, never used: ended when the task returns
	})
	if err != nil {
		t.Fatal(err)
	}
}
