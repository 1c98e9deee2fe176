package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// runProcs runs a job of procs processes inside this process, connected on loopback; it
// returns each rank's Run error.
func runProcs(t *testing.T, ctx context.Context, procs int, cfg orwl.Config, fn orwl.TaskFunc) []error {
	t.Helper()
	return runEachProc(t, ctx, procs, func(int) orwl.Config { return cfg }, fn)
}

// runEachProc is runProcs with the configuration of each rank.
func runEachProc(t *testing.T, ctx context.Context, procs int, config func(rank int) orwl.Config, fn orwl.TaskFunc) []error {
	t.Helper()
	coord := freeAddr(t)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for rank := range procs {
		cfg := config(rank)
		cfg.Job = &orwl.Job{Rank: rank, Size: procs, Coord: coord, Secret: []byte("contract")}
		if rank > 0 { // their ephemeral ports can then never take the coordinator's, free until rank 0 listens
			cfg.Job.Listen = "127.0.0.2"
		}
		wg.Go(func() { errs[rank] = orwl.Run(ctx, cfg, fn) })
	}
	wg.Wait()
	return errs
}

// cancelThenRelease is the job of the cancellation contract: task 0 holds its location x
// until task 1 is about to acquire x with waitCtx, cancels waitCtx and then releases x; task
// 1 must see its acquire fail with the context's error although the grant follows at once.
// It reports task 1's acquire error on acquired (nil: granted).
func cancelThenRelease(waitCtx context.Context, cancel context.CancelFunc, acquired *error) orwl.TaskFunc {
	waiting := make(chan struct{})
	return func(ctx context.Context, task *orwl.Task) error {
		x := task.WriteInsertOnce(task.Loc(0, "x"), task.ID())
		if err := task.Schedule(ctx); err != nil {
			return err
		}
		if task.ID() == 0 {
			return x.Section(ctx, func([]byte) error { <-waiting; cancel(); return nil })
		}
		close(waiting)
		*acquired = x.Acquire(waitCtx)
		if *acquired == nil {
			return x.Release()
		}
		return *acquired
	}
}

// TestCancellationBeforeGrantWinsInAJob: rule 5 through the public API, for a local and a
// remote location: the acquire fails with the context's error, and so does the job.
func TestCancellationBeforeGrantWinsInAJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs int
		run  func(fn orwl.TaskFunc) error // the error of task 1's process
	}{
		{"local", 500, func(fn orwl.TaskFunc) error {
			return orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}}, fn)
		}},
		{"remote", 50, func(fn orwl.TaskFunc) error {
			return runProcs(t, context.Background(), 2, orwl.Config{Tasks: 2, Locations: []string{"x"}}, fn)[1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			granted := 0
			for range tc.runs {
				waitCtx, cancel := context.WithCancel(context.Background())
				var acquired error
				err := tc.run(cancelThenRelease(waitCtx, cancel, &acquired))
				cancel()
				switch {
				case acquired == nil:
					granted++
				case !errors.Is(acquired, context.Canceled):
					t.Fatalf("acquire: %v, want the context's error", acquired)
				case !errors.Is(err, context.Canceled):
					t.Fatalf("Run: %v, want the context's error", err)
				}
			}
			if granted > 0 {
				t.Fatalf("%d of %d acquires whose context ended before the grant returned the grant", granted, tc.runs)
			}
		})
	}
}

// joinedGroup is the job of Test's contract. Task 0 writes x of task owner every iteration
// (position 0) and task 1 reads it (position 1, iterative); inside its read section, task 1
// also requests a one-shot read, which joins the group of its own next iteration (rule 2).
// When task 1's next Acquire returns, that group is granted as a whole, so Test of the
// one-shot read must report true. It returns how many of iters Tests reported false.
func joinedGroup(owner, iters int, missed *int) orwl.TaskFunc {
	return func(ctx context.Context, task *orwl.Task) error {
		x := task.Loc(owner, "x")
		var h *orwl.Handle
		switch task.ID() {
		case 0:
			h = task.WriteInsert(x, 0)
		case 1:
			h = task.ReadInsert(x, 1)
		}
		if err := task.Schedule(ctx); err != nil || h == nil {
			return err
		}
		var extra *orwl.Handle
		for range iters {
			if err := h.Acquire(ctx); err != nil {
				return err
			}
			if extra != nil {
				if !extra.Test() {
					*missed++
				}
				if err := extra.Close(); err != nil {
					return err
				}
				extra = nil
			}
			if task.ID() == 1 {
				var err error
				if extra, err = task.ReadRequest(x); err != nil {
					return err
				}
			}
			if err := h.Release(); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestTestSeesTheWholeGroup: Test reports a grant decided before the caller's last
// synchronisation with the FIFO (here its own Acquire, granted with the same group), for a
// location of the writer's task, of the reader's, or of an uninvolved task, in one process
// and with every task in a process of its own.
func TestTestSeesTheWholeGroup(t *testing.T) {
	const iters = 2000
	cfg := orwl.Config{Tasks: 3, Locations: []string{"x"}}
	for _, procs := range []int{1, 3} {
		for owner, whose := range []string{"writer's", "reader's", "uninvolved"} {
			t.Run(fmt.Sprintf("%d procs/%s", procs, whose), func(t *testing.T) {
				missed := 0
				var err error
				if procs == 1 {
					err = orwl.Run(context.Background(), cfg, joinedGroup(owner, iters, &missed))
				} else {
					err = errors.Join(runProcs(t, context.Background(), procs, cfg, joinedGroup(owner, iters, &missed))...)
				}
				if err != nil {
					t.Fatal(err)
				}
				if missed > 0 {
					t.Fatalf("Test reported false for %d of %d requests granted with the group just acquired", missed, iters-1)
				}
			})
		}
	}
}
