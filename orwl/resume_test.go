package orwl_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/orwl"
)

// initRing is a ring of tasks that initialises its locations after the schedule, with a
// one-shot write declared in the init phase (WriteInsertOnce's own example): task 1 writes
// the first value of its right neighbour's v (the others start at 0), then every iteration
// mixes each v with its left neighbour's. Its state is in its locations: Task.Iterate is all it takes to
// checkpoint.
type initRing struct {
	tasks, iters int
	dir          string // checkpoint pattern
	guard        bool   // declare the initialisation only on a fresh start (Resumed() == 0)
	stop         bool   // task 1 fails once a checkpoint is complete
	mu           sync.Mutex
	final        map[int]float64 // v of every task after the last iteration
	ran          int             // iterations run by the tasks' bodies, all tasks together
	resumed      int
}

const initRingProgram = "initring"

func (r *initRing) config(int) orwl.Config {
	return orwl.Config{Tasks: r.tasks, Locations: []string{"v"},
		Checkpoint: orwl.Checkpoint{Dir: r.dir, Every: 2 * time.Millisecond, Program: initRingProgram}}
}

func (r *initRing) task(ctx context.Context, t *orwl.Task) error {
	me, left, right := t.ID(), (t.ID()+t.NumTasks()-1)%t.NumTasks(), (t.ID()+1)%t.NumTasks()
	t.Scale("v", 8)
	var init *orwl.Handle
	if me == 1 && (!r.guard || t.Resumed() == 0) {
		init = t.WriteInsertOnce(t.Loc(right, "v"), 0)
	}
	own := t.WriteInsert(t.Loc(me, "v"), 1)
	in := t.ReadInsert(t.Loc(left, "v"), 1)
	if err := t.Schedule(ctx); err != nil {
		return err
	}
	if init != nil {
		if err := init.Section(ctx, func(v []byte) error {
			orwl.Float64s(v)[0] = float64(100 + me)
			return nil
		}); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.resumed = t.Resumed()
	r.mu.Unlock()
	return t.Iterate(ctx, r.iters, func(iter int) error {
		if r.stop && me == 1 && iter%16 == 0 && r.checkpoint() > 0 {
			return errInjected
		}
		r.mu.Lock()
		r.ran++
		r.mu.Unlock()
		return own.Section(ctx, func(v []byte) error {
			return in.Section(ctx, func(l []byte) error {
				x := orwl.Float64s(v)
				x[0] = math.Mod(x[0]*0.5+orwl.Float64s(l)[0]+float64(iter%7), 1e6)
				if iter == r.iters-1 {
					r.mu.Lock()
					r.final[me] = x[0]
					r.mu.Unlock()
				}
				return nil
			})
		})
	})
}

// checkpoint returns the iteration of the newest complete checkpoint in the job's
// directories, 0 when there is none.
func (r *initRing) checkpoint() int {
	dirs, _ := checkpoint.Glob(r.dir)
	cp, _, err := checkpoint.Find(dirs, checkpoint.Fingerprint{Program: initRingProgram, Tasks: r.tasks,
		Locations: []string{"v"}})
	if err != nil || cp == nil {
		return 0
	}
	return cp.Number
}

// run runs the job over procs processes (in this process).
func (r *initRing) run(t *testing.T, procs int) (map[int]float64, error) {
	t.Helper()
	r.final, r.ran = map[int]float64{}, 0
	if procs == 1 {
		return r.final, orwl.Run(context.Background(), r.config(0), r.task)
	}
	return r.final, errors.Join(runEachProc(t, context.Background(), procs, r.config, r.task)...)
}

// checkpointed runs r, with stop set and no end, on one process until a checkpoint is
// complete, and returns its iteration.
func (r *initRing) checkpointed(t *testing.T) int {
	t.Helper()
	stop := &initRing{tasks: r.tasks, iters: math.MaxInt32, dir: r.dir, guard: r.guard, stop: true}
	if _, err := stop.run(t, 1); !errors.Is(err, errInjected) {
		t.Fatalf("job stopped after a checkpoint: %v, want the injected failure", err)
	}
	k := r.checkpoint()
	if k == 0 {
		t.Fatal("no complete checkpoint after the job stopped")
	}
	return k
}

// TestResumeRefusesInitialWriteOverRestoredData: a program that initialises a location
// with a one-shot write declared in the init phase, resumed from a checkpoint, would write
// its initial value over the restored data of a location in the middle of its iterations
// and end, without an error, with values that no uninterrupted run gives. Schedule refuses
// it, naming the handle (the restart runs on 2 processes, so the write of task 1 on task
// 2's v is another process's); declared only on a fresh start (Resumed() == 0), the same
// program resumes to the values of an uninterrupted run.
func TestResumeRefusesInitialWriteOverRestoredData(t *testing.T) {
	const tasks = 4
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guard), func(t *testing.T) {
			r := &initRing{tasks: tasks, dir: filepath.Join(memDir(t), "{rank}"), guard: guard}
			k := r.checkpointed(t)
			r.iters = k + 300 // the program declares no Params: any length may resume
			want, err := (&initRing{tasks: tasks, iters: r.iters, dir: filepath.Join(memDir(t), "{rank}")}).run(t, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.run(t, 2)
			if guard {
				if err != nil || r.resumed != k {
					t.Fatalf("restart from checkpoint %d: %v, resumed at %d", k, err, r.resumed)
				}
				for task := range tasks {
					if got[task] != want[task] {
						t.Fatalf("task %d ended with %v after resuming at iteration %d, an uninterrupted run with %v", task, got[task], k, want[task])
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("restart from checkpoint %d succeeded with values %v, an uninterrupted run ends with %v: want an error naming the initial write", k, got, want)
			}
			for _, part := range []string{`task 1: WriteInsertOnce on task 2 "v" at position 0`, fmt.Sprintf("checkpoint of iteration %d", k), "Resumed() == 0"} {
				if !strings.Contains(err.Error(), part) {
					t.Fatalf("restart from checkpoint %d: %v, want it to say %q", k, err, part)
				}
			}
		})
	}
}

// TestResumePastTheLastIterationFails: a checkpoint of iteration k restarts a job whose
// Iterate runs k iterations or fewer (a longer run's directory, the program declaring no
// Params that would tell the jobs apart): nothing would run, and the job would end with the
// values of the longer run's iteration k. Iterate fails, naming k and its n.
func TestResumePastTheLastIterationFails(t *testing.T) {
	r := &initRing{tasks: 2, dir: filepath.Join(memDir(t), "{rank}"), guard: true}
	k := r.checkpointed(t)
	for _, n := range []int{k, 1} {
		r.iters = n
		_, err := r.run(t, 1)
		if err == nil {
			t.Fatalf("restart with %d iterations from the checkpoint of iteration %d succeeded, its tasks ran %d iterations: want an error", n, k, r.ran)
		}
		if want := fmt.Sprintf("checkpoint of iteration %d, and Iterate's last iteration is %d (n = %d)", k, n-1, n); !strings.Contains(err.Error(), want) {
			t.Fatalf("restart with %d iterations from checkpoint %d: %v, want it to say %q", n, k, err, want)
		}
	}
}

// TestIterateRefusesSkippedHandleWithoutCheckpoints: in any job, not only one that takes
// checkpoints, an iterative handle that an iteration of Iterate does not acquire shifts the
// rounds of its location against the iterations. Task 0 writes slots s0 and s1 in every
// iteration, task 1 reads slot iter%2: it would read, at its iterations 1, 3, 5..., what
// task 0 wrote at iterations 0, 1, 2... Iterate fails, naming the handle and the iteration
// that skipped it.
func TestIterateRefusesSkippedHandleWithoutCheckpoints(t *testing.T) {
	cfg := orwl.Config{Tasks: 2, Locations: []string{"s0", "s1"}}
	var seen []string // what task 1 read, for the message
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		var slots [2]*orwl.Handle
		for s, name := range cfg.Locations {
			t.Scale(name, 8)
			if t.ID() == 0 {
				slots[s] = t.WriteInsert(t.Loc(0, name), 0)
			} else {
				slots[s] = t.ReadInsert(t.Loc(0, name), 1)
			}
		}
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, 10, func(iter int) error {
			if t.ID() == 0 {
				for _, h := range slots {
					if err := h.Section(ctx, func(b []byte) error {
						orwl.Float64s(b)[0] = float64(iter)
						return nil
					}); err != nil {
						return err
					}
				}
				return nil
			}
			return slots[iter%2].Section(ctx, func(b []byte) error {
				seen = append(seen, fmt.Sprintf("iteration %d read %v", iter, orwl.Float64s(b)[0]))
				return nil
			})
		})
	})
	want := `task 1: iteration 0 of Iterate acquired the iterative handle on task 0 "s1" (position 1) 0 times`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v (task 1: %q), want an error saying %q", err, seen, want)
	}
}

// TestIterateRefusesHandleAcquiredTwice: an iteration that acquires an iterative handle
// twice takes two rounds of its location in one iteration; Iterate fails at the next one.
func TestIterateRefusesHandleAcquiredTwice(t *testing.T) {
	cfg := orwl.Config{Tasks: 1, Locations: []string{"v"}}
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		h := t.WriteInsert(t.Loc(0, "v"), 0)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, 5, func(iter int) error {
			for range 1 + iter/2 { // twice from iteration 2 on
				if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
					return err
				}
			}
			return nil
		})
	})
	want := `task 0: iteration 2 of Iterate acquired the iterative handle on task 0 "v" (position 0) 2 times`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v, want an error saying %q", err, want)
	}
}
