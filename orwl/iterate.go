package orwl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// The user API of checkpoints: Config.Checkpoint, Task.Keep, Task.Iterate and what they
// check (checkpoint.go has the overview).

// Checkpoint configures the checkpoints of a job (see Task.Iterate and Task.Keep). They are
// taken only between the iterations of Task.Iterate: a job whose tasks never run it takes
// none, and rank 0 says so when the job ends.
type Checkpoint struct {
	// Dir is where checkpoints are written and, at the start, looked for: a directory
	// pattern in which "{rank}" and "{host}" become this process's rank and host name, so
	// that each process writes to a disk of its node. A Dir without "{rank}" is the job's
	// directory, which its processes share (on one host, or on a file system that every
	// host mounts): each writes into its subdirectory "rank-R" (checkpoint.Expand). At the
	// start each process looks in the directories of the pattern it sees; they need not be
	// shared (restore.go). A directory that another job (or another run of this one) is
	// writing is refused, naming that process. Empty means ORWL_CHECKPOINT_DIR, and when
	// that is empty too the job takes no checkpoints.
	Dir string
	// Every is the time between two checkpoints (0: ORWL_CHECKPOINT_EVERY, else 1 minute).
	Every time.Duration
	// Program names the program in the checkpoints' fingerprint (default: the base name of
	// the executable); Params are the parameters that must be the same for a job to restart
	// from a checkpoint (problem size, iterations...). A job is known by Program, Tasks, the
	// names of Locations and Params (and a kept state by its size): a restart from the
	// checkpoints of another is refused, naming the difference. A changed program whose
	// computation differs, not its shape, is the same job to the checkpoints: give it another
	// Program or Params (a version), or another Dir, so that it does not resume from the
	// old one's. A job that succeeded marks its checkpoints finished: run again on the same
	// Dir, it starts afresh and says why, and a run that fails after a checkpoint of its own
	// resumes from that one.
	Program string
	Params  map[string]string
}

// Environment variables of Config.Checkpoint.
const (
	envCheckpointDir       = "ORWL_CHECKPOINT_DIR"
	envCheckpointEvery     = "ORWL_CHECKPOINT_EVERY"
	defaultCheckpointEvery = time.Minute
)

// taskCkpt is a task's part in Iterate and in the checkpoints of its job.
type taskCkpt struct {
	kept      []keptState      // private state in its checkpoints (Keep)
	iterative []*handle.Handle // its iterative handles (Iterate checks that each iteration acquires them once)
	entered   int              // checkpoints the task entered (CheckpointHold)
	held      time.Duration    // the time they held it up
	iterating atomic.Bool      // in Iterate, in a job that takes checkpoints
	owes      bool             // counted in checkpointer.owing; under its mu
}

// Keep registers state, memory of the task's own that it keeps across iterations, as part
// of the task's checkpoints: it is copied when the task enters a checkpoint's iteration and
// restored before Schedule returns when the job restarts. name tells the task's states
// apart. It belongs to the init phase and does nothing in a job without checkpoints.
func (t *Task) Keep(name string, state []byte) {
	switch {
	case t.scheduled:
		t.complain(fmt.Errorf("task %d: Keep(%q) after Schedule", t.id, name))
		return
	case name == "":
		t.complain(fmt.Errorf("task %d: Keep with an empty name", t.id))
		return
	}
	for _, s := range t.ckpt.kept {
		if s.name == name {
			t.complain(fmt.Errorf("task %d: Keep(%q) twice", t.id, name))
			return
		}
	}
	t.ckpt.kept = append(t.ckpt.kept, keptState{name: name, buf: state})
}

// Iterate runs body for iterations 0 to n-1 of the task, in order, and returns the first
// error. Every iteration must acquire each of the task's iterative handles once, as the
// schedule's discipline has it, so that the k-th round of every location is its iteration
// k; handles used in turn, one every S iterations, belong in one iteration of S steps.
// Iterate checks it as each iteration begins, in every job, and fails naming the handle and
// the iteration that acquired it another number of times (nothing follows the last
// iteration: it may leave handles out).
//
// In a job that takes checkpoints (Config.Checkpoint), a restarted job resumes at the
// iteration k of its checkpoint (Resumed), with its locations and kept states as they were
// then; a checkpoint of iteration n or later belongs to a longer run, and Iterate fails.
// Body's iterations are where checkpoints are taken: a task may wait at the start of one for
// a checkpoint being prepared (a few messages), and copies its kept states at the start of
// a checkpoint's iteration.
func (t *Task) Iterate(ctx context.Context, n int, body func(iter int) error) error {
	c := t.job.ckpt
	start := c.start()
	if start > 0 && start >= n {
		return fmt.Errorf("orwl: task %d: the job resumed from the checkpoint of iteration %d, and Iterate's last iteration is %d (n = %d): the checkpoints in %s belong to a longer run; give this run another directory (Config.Checkpoint.Dir, ORWL_CHECKPOINT_DIR), and declare the iteration count in Config.Checkpoint.Params so that a run of another length refuses them",
			t.id, start, n-1, n, c.store.Dir())
	}
	if c != nil {
		for {
			m := c.minIter.Load()
			if int64(n) >= m || c.minIter.CompareAndSwap(m, int64(n)) {
				break
			}
		}
		t.ckpt.iterating.Store(true)
		defer func() {
			t.ckpt.iterating.Store(false)
			t.paid()
		}()
	}
	base := make([]int, len(t.ckpt.iterative)) // their acquires before the first iteration
	for i, h := range t.ckpt.iterative {
		base[i] = h.Acquires()
	}
	for iter := start; iter < n; iter++ {
		if iter > start {
			if err := t.checkRounds(base, iter-start); err != nil {
				return err
			}
		}
		if c != nil {
			if err := c.enter(ctx, t, iter); err != nil {
				return err
			}
		}
		if err := body(iter); err != nil {
			return err
		}
	}
	return nil
}

// checkRounds reports an iterative handle of t that was not acquired once in each of the
// done iterations of Iterate, given its acquires before them (base, in the order of
// t.ckpt.iterative); every iteration is checked as the next begins, so it is the last one that
// did not. The rounds of the handle's location would no longer be iterations: its other
// handles would see the accesses of other iterations, and no checkpoint would be
// consistent, nor complete.
func (t *Task) checkRounds(base []int, done int) error {
	for i, h := range t.ckpt.iterative {
		if got := h.Acquires() - base[i]; got != done {
			s := h.Spec()
			return fmt.Errorf("orwl: task %d: iteration %d of Iterate acquired the iterative handle on %s (position %d) %d times: every iteration must acquire each iterative handle of the task once, or the rounds of its location no longer follow the iterations (group the iterations of handles used in turn into one)",
				t.id, t.job.ckpt.start()+done-1, s.Location, s.Pos, got-done+1)
		}
	}
	return nil
}

// CheckpointHold returns how many checkpoints the task entered in Iterate (copying its kept
// states), and the time checkpoints held it up there: waiting at the start of an iteration
// for a checkpoint being prepared, and copying its kept states. A location's copy, taken
// under its lock when its round is granted, is not in it. It is meant for the task itself
// (it is not safe to call from another goroutine while the task iterates).
func (t *Task) CheckpointHold() (checkpoints int, held time.Duration) {
	return t.ckpt.entered, t.ckpt.held
}

// Resumed returns the iteration at which the job restarted from a checkpoint, 0 for a job
// that started afresh. It is known from the start of the task, init phase included. A
// resumed job's locations hold the checkpoint's data when Schedule returns: its
// initialisation, and the one-shot write handles declared for it, belong to a fresh start
// only (if t.Resumed() == 0 { ... }). Schedule refuses a one-shot write declared in the
// init phase (WriteInsertOnce) on a location that iterative handles use, in a resumed job:
// it would replace the restored data with an initial value.
func (t *Task) Resumed() int { return t.job.ckpt.start() }

// refuseInitialWrites reports, in a job resumed from a checkpoint, the one-shot writes
// declared in the init phase (WriteInsertOnce) on this process's locations that iterative
// handles use: the schedule would place them among the requests of the checkpoint's round,
// and they would replace the restored data, mid-iteration, with initial values. It runs at
// the schedule, once every initial request of the job is with its owner.
func (c *checkpointer) refuseInitialWrites() error {
	k := c.start()
	if k == 0 {
		return nil
	}
	var errs []error
	for _, l := range c.j.owned {
		if l == nil {
			continue
		}
		l.mu.Lock()
		var writes []pendingRequest
		for _, p := range l.pending {
			if l.ckpt.rounds && p.initial && p.mode == fifo.Write && p.req.Tag.(queued).round() < 0 {
				writes = append(writes, p)
			}
		}
		l.mu.Unlock()
		slices.SortFunc(writes, func(a, b pendingRequest) int { return cmp.Or(a.task-b.task, a.pos-b.pos) })
		for _, p := range writes {
			errs = append(errs, fmt.Errorf("orwl: task %d: WriteInsertOnce on %s at position %d in a job resumed from the checkpoint of iteration %d: the location's data is restored from the checkpoint and iterative handles use it, so this write would replace the data of iteration %d with an initial value; declare initialisation handles, and run their sections, only on a fresh start (if t.Resumed() == 0 { ... })",
				p.task, l.id, p.pos, k, k))
		}
	}
	return errors.Join(errs...)
}
