package orwl

import (
	"context"
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/transport"
)

// Task is one task of the job, handed to its TaskFunc. Its methods must be called from the
// task's own goroutine.
type Task struct {
	id  int
	job *job
	obs observer

	handles   *handle.Owner     // what its handles share: the observer, those in use, the wake-ups
	poller    *transport.Poller // where it waits for messages in a job of several processes (Waiting)
	inserts   []*handle.Handle  // handles declared in the init phase, requested at the schedule
	problems  []error           // init-phase mistakes, reported by Schedule
	misuse    []error           // mistakes after the schedule, returned when the task ends
	scheduled bool

	failedGrants []failedGrant // grants of write sections that failed, held until the task ends
	ckpt         taskCkpt      // its part in Iterate and in the job's checkpoints (iterate.go)
}

// failedGrant is the grant of a write section that failed: nothing is handed on from it,
// and its location fails when the task ends.
type failedGrant struct {
	t   ticket
	err error
}

// ID returns the task's number, 0 <= ID < NumTasks.
func (t *Task) ID() int { return t.id }

// NumTasks returns the number of tasks in the whole job.
func (t *Task) NumTasks() int { return t.job.tasks }

// NumProcs returns the number of processes the job runs on.
func (t *Task) NumProcs() int { return t.job.procs }

// ProcOf returns the rank of the process that runs task (Config.Place), or -1 for a task
// that does not exist.
func (t *Task) ProcOf(task int) int {
	if task < 0 || task >= t.job.tasks {
		return -1
	}
	return t.job.owner[task]
}

// Loc names the location called name of task task. It does not check them: inserts do.
func (t *Task) Loc(task int, name string) Location { return Location{Task: task, Name: name} }

// Scale sets the size in bytes of this task's location name, zero-filled. It belongs to the
// init phase: mistakes (unknown name, negative size, a call after Schedule) are reported by
// Schedule, or, after it, when the task returns.
func (t *Task) Scale(name string, bytes int) {
	l, err := t.job.ownLocation(Location{Task: t.id, Name: name})
	switch {
	case err != nil:
	case bytes < 0:
		err = fmt.Errorf("%w %d", handle.ErrNegativeSize, bytes)
	case t.scheduled:
		err = errors.New("called after Schedule; resize inside a write section instead")
	}
	if err != nil {
		t.complain(fmt.Errorf("task %d: Scale(%q, %d): %w", t.id, name, bytes, err))
		return
	}
	freeBytes(l.data)
	l.data = t.job.bufs.data(bytes)
}

// complain records a mistake: before the schedule Schedule reports it to every task, after it
// the task's result carries it.
func (t *Task) complain(err error) {
	if t.scheduled {
		t.misuse = append(t.misuse, err)
	} else {
		t.problems = append(t.problems, err)
	}
}

// ReadInsert declares an iterative read handle on l at FIFO position pos (pos >= 0).
// It never blocks and never fails on the spot: mistakes are reported by Schedule, and the
// returned handle of a mistaken insert fails when used.
func (t *Task) ReadInsert(l Location, pos int) *Handle {
	return t.insert(l, pos, fifo.Read, true)
}

// WriteInsert declares an iterative write handle on l at FIFO position pos, like ReadInsert.
func (t *Task) WriteInsert(l Location, pos int) *Handle {
	return t.insert(l, pos, fifo.Write, true)
}

// ReadInsertOnce declares a one-shot read handle on l at FIFO position pos: it serves one
// Acquire/Release, for example to read initial data (in a job resumed from a checkpoint, it
// reads the restored data). Otherwise like ReadInsert.
func (t *Task) ReadInsertOnce(l Location, pos int) *Handle {
	return t.insert(l, pos, fifo.Read, false)
}

// WriteInsertOnce declares a one-shot write handle on l at FIFO position pos, for example to
// initialise a location before the iterations, or to publish a result after them.
// Otherwise like ReadInsert. A job resumed from a checkpoint starts with the restored data:
// declare initialisation handles only when t.Resumed() == 0; Schedule refuses, in a resumed
// job, a one-shot write declared on a location that iterative handles use.
func (t *Task) WriteInsertOnce(l Location, pos int) *Handle {
	return t.insert(l, pos, fifo.Write, false)
}

func (t *Task) insert(l Location, pos int, mode fifo.Mode, iterative bool) *Handle {
	spec := handle.Spec{Task: t.id, Location: l.String(), Pos: pos, Mode: mode, Iterative: iterative}
	q, err := t.job.queue(l)
	switch {
	case err != nil:
	case pos < 0:
		err = fmt.Errorf("negative FIFO position %d", pos)
	case t.scheduled:
		err = errors.New("insert after Schedule; use ReadRequest or WriteRequest for requests made later")
	}
	if err != nil {
		err = fmt.Errorf("task %d: %s insert on %s at position %d: %w", t.id, mode, l, pos, err)
		t.complain(err)
		return &Handle{handle.Closed(spec, err, t.handles)}
	}
	h := handle.New(q, spec, t.handles)
	t.inserts = append(t.inserts, h)
	return &Handle{h}
}

// ReadRequest makes a one-shot read handle on l whose request is placed at the tail of l's
// FIFO now. It belongs after Schedule.
func (t *Task) ReadRequest(l Location) (*Handle, error) {
	return t.request(l, fifo.Read)
}

// WriteRequest makes a one-shot write handle on l whose request is placed at the tail of l's
// FIFO now. It belongs after Schedule.
func (t *Task) WriteRequest(l Location) (*Handle, error) {
	return t.request(l, fifo.Write)
}

func (t *Task) request(l Location, mode fifo.Mode) (*Handle, error) {
	q, err := t.job.queue(l)
	if err == nil && !t.scheduled {
		err = errors.New("request before Schedule; use ReadInsertOnce or WriteInsertOnce in the init phase")
	}
	if err != nil {
		return nil, fmt.Errorf("task %d: %s request on %s: %w", t.id, mode, l, err)
	}
	h := handle.New(q, handle.Spec{Task: t.id, Location: l.String(), Mode: mode}, t.handles)
	if err := h.Request(); err != nil {
		return nil, err
	}
	return &Handle{h}, nil
}

// Schedule is the global barrier that ends the init phase: when it returns nil, the FIFO of
// every location of the job holds the inserted requests in the order (position, task id,
// declaration order), adjacent reads grouped. It returns the init-phase mistakes of all
// tasks, joined, to every task. A task may call it once; a task that returns without
// calling it counts as having arrived with no requests.
func (t *Task) Schedule(ctx context.Context) error {
	if t.scheduled {
		return fmt.Errorf("task %d: Schedule called twice", t.id)
	}
	t.scheduled = true
	return t.job.arrive(ctx, t, true)
}

// finish ends the task: everything it holds or has queued is released or cancelled (in a
// failed job the locations hand nothing on).
func (t *Task) finish() error {
	return errors.Join(append(t.misuse, t.handles.CloseAll())...)
}
