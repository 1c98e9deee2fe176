package orwl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orwl-go/orwl/fifo"
)

// This file holds the schedule: the barrier the tasks arrive at with their inserts, the
// init-phase mistakes reported to every task, and the initial requests placed in every
// FIFO in the global order (location.schedule). It runs once, before any grant: it is
// apart from run.go, the job's life, and from location.go, which every grant reads.

// arrive is the schedule barrier. The last task of this process to arrive runs the
// schedule; with requests false the task (which has returned) brings none and does not wait.
func (j *job) arrive(ctx context.Context, t *Task, requests bool) error {
	j.mu.Lock()
	if requests {
		j.arrived = append(j.arrived, t)
	}
	j.pending--
	last := j.pending == 0
	j.mu.Unlock()
	if last {
		j.schedErr = j.schedule(ctx)
		close(j.scheduled)
	}
	if !requests {
		return nil
	}
	select {
	case <-j.scheduled:
		return j.schedErr
	case <-ctx.Done():
		return fmt.Errorf("task %d: schedule: %w", t.id, context.Cause(ctx))
	}
}

// scheduleError holds the init-phase mistakes of every task of the job, which the schedule
// reports to every task in every process.
type scheduleError struct{ problems error }

func (e *scheduleError) Error() string { return "orwl: schedule: " + e.problems.Error() }
func (e *scheduleError) Unwrap() error { return e.problems }

// schedule reports the init-phase mistakes of every task of the job, or places every
// declared request in the global order. Every task of this process has arrived.
func (j *job) schedule(ctx context.Context) error {
	defer j.rec.BeginBarrier("schedule").End()
	slices.SortFunc(j.arrived, func(a, b *Task) int { return a.id - b.id })
	var problems []error
	for _, t := range j.local {
		problems = append(problems, t.problems...)
	}
	if j.node != nil {
		all, err := j.node.exchangeProblems(ctx, problems)
		if err != nil {
			return fmt.Errorf("orwl: schedule: %w", err)
		}
		if len(all) > 0 { // the same text on every process
			return &scheduleError{errors.New(strings.Join(all, "\n"))}
		}
	} else if len(problems) > 0 {
		return &scheduleError{errors.Join(problems...)}
	}
	if err := j.ckpt.restore(); err != nil {
		return err
	}
	j.ckpt.allocate()
	for _, t := range j.arrived {
		for _, h := range t.inserts {
			if err := h.Request(); err != nil {
				return err
			}
			if h.Spec().Iterative {
				t.ckpt.iterative = append(t.ckpt.iterative, h)
			}
		}
		t.inserts = nil
	}
	if j.node != nil {
		// Every initial request of the job is now with its owner (requests travel on the
		// connections the barrier's markers follow).
		if err := j.mesh.Barrier(ctx); err != nil {
			return fmt.Errorf("orwl: schedule: %w", err)
		}
	}
	if err := j.ckpt.refuseInitialWrites(); err != nil {
		j.fail(err) // its locations refuse every request: none is left unscheduled
		return err
	}
	for _, l := range j.owned {
		if l != nil {
			if err := l.schedule(); err != nil {
				return err
			}
		}
	}
	j.requestsLive.Store(true)
	return nil
}

// pendingRequest is a request that came before the schedule placed the initial ones.
type pendingRequest struct {
	initial   bool // declared in the init phase (else a later request that arrived early)
	pos, task int
	req       *fifo.Request
	mode      fifo.Mode
}

// schedule places the initial requests in the FIFO ordered by position, then task id, then
// arrival order (which is declaration order within a task), then the requests that arrived
// early from processes already past the schedule, and lets later requests in.
func (l *location) schedule() error {
	var granted []*fifo.Request
	l.mu.Lock()
	slices.SortStableFunc(l.pending, func(a, b pendingRequest) int {
		if a.initial != b.initial {
			if a.initial {
				return -1
			}
			return 1
		}
		if !a.initial {
			return 0
		}
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.task, b.task))
	})
	if paired, err := l.pairUp(); paired {
		l.pending = nil
		l.scheduled = true
		l.mu.Unlock()
		l.j.log.Debug("orwl: a pair", "location", l.id.String(), "reader", l.pair.rank)
		return err
	}
	var err error
	for _, p := range l.pending {
		if granted, err = l.fifo.Enqueue(p.req, p.mode, granted); err != nil {
			err = fmt.Errorf("schedule %s: %w", l.id, err)
			break
		}
	}
	l.granting(granted)
	l.pending = nil
	l.scheduled = true
	l.mu.Unlock()
	deliver(granted, true)
	return err
}
