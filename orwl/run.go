package orwl

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Config describes a job.
type Config struct {
	// Tasks is the number of tasks in the whole job.
	Tasks int
	// Locations are the names of the locations every task owns.
	Locations []string
}

// TaskFunc is the program of every task. Returning a non-nil error cancels the context of
// the other tasks, and Run returns the first such error.
type TaskFunc func(ctx context.Context, t *Task) error

// Errors that Run and Acquire report; test for them with errors.Is.
var (
	// ErrDeadlock: every task still running was blocked in Acquire, waiting in a cycle.
	// The error that matches it is a *DeadlockError naming the cycle.
	ErrDeadlock = errors.New("orwl: deadlock")
	// ErrPeerLost: a process of the job is gone.
	ErrPeerLost = errors.New("orwl: peer process lost")
)

// Run runs the tasks of this process, each in its own goroutine, and returns when all of
// them have returned: nil, or the first error of a task, of a deadlock, or of the job's
// configuration. A task that panics fails the job with an error holding the panic's stack.
func Run(ctx context.Context, cfg Config, fn TaskFunc) error {
	j, err := newJob(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	j.cancel = cancel
	var wg sync.WaitGroup
	for _, t := range j.local {
		wg.Go(func() { j.runTask(ctx, t, fn) })
	}
	wg.Wait()
	return j.err
}

// job is this process's view of the whole job.
type job struct {
	tasks   int
	names   []string
	nameIdx map[string]int
	locs    []*location // by task*len(names)+name index
	local   []*Task     // the tasks this process runs, by id
	det     detector
	cancel  context.CancelCauseFunc

	mu        sync.Mutex
	err       error         // the first failure
	arrived   []*Task       // tasks that reached the schedule, with their requests
	pending   int           // tasks that have not reached the schedule nor returned
	scheduled chan struct{} // closed when the schedule is done
	schedErr  error
}

func newJob(cfg Config) (*job, error) {
	if cfg.Tasks < 1 {
		return nil, fmt.Errorf("orwl: Config.Tasks is %d; a job needs at least one task", cfg.Tasks)
	}
	if len(cfg.Locations) == 0 {
		return nil, errors.New("orwl: Config.Locations is empty; every task needs at least one location")
	}
	j := &job{
		tasks:     cfg.Tasks,
		names:     slices.Clone(cfg.Locations),
		nameIdx:   make(map[string]int, len(cfg.Locations)),
		scheduled: make(chan struct{}),
	}
	for i, name := range j.names {
		if name == "" {
			return nil, fmt.Errorf("orwl: Config.Locations[%d] is empty; locations need names", i)
		}
		if _, dup := j.nameIdx[name]; dup {
			return nil, fmt.Errorf("orwl: Config.Locations names %q twice", name)
		}
		j.nameIdx[name] = i
	}
	j.locs = make([]*location, cfg.Tasks*len(j.names))
	for task := range cfg.Tasks {
		for i, name := range j.names {
			j.locs[task*len(j.names)+i] = &location{id: Location{Task: task, Name: name}, data: alignedBytes(0)}
		}
	}
	j.local = make([]*Task, cfg.Tasks)
	for id := range j.local {
		t := &Task{id: id, job: j}
		t.obs.task = t
		j.local[id] = t
	}
	j.pending = len(j.local)
	j.det.running.Store(int64(len(j.local)))
	j.det.slots = make([]atomic.Pointer[waiting], cfg.Tasks)
	j.det.report = j.fail
	return j, nil
}

// locIndex checks l and returns its index in j.locs.
func (j *job) locIndex(l Location) (int, error) {
	if l.Task < 0 || l.Task >= j.tasks {
		return 0, fmt.Errorf("no task %d: the job has %d tasks", l.Task, j.tasks)
	}
	i, ok := j.nameIdx[l.Name]
	if !ok {
		return 0, fmt.Errorf("no location named %q: the job's locations are %s", l.Name, strings.Join(j.names, ", "))
	}
	return l.Task*len(j.names) + i, nil
}

// queue returns the queue that handles on l talk to.
func (j *job) queue(l Location) (*location, error) {
	i, err := j.locIndex(l)
	if err != nil {
		return nil, err
	}
	return j.locs[i], nil
}

// ownLocation returns l, which must be a location this process owns.
func (j *job) ownLocation(l Location) (*location, error) { return j.queue(l) }

// fail records the job's first failure and cancels every task's context with it.
func (j *job) fail(err error) {
	j.mu.Lock()
	first := j.err == nil
	if first {
		j.err = err
	}
	j.mu.Unlock()
	if first {
		j.cancel(err)
	}
}

func (j *job) runTask(ctx context.Context, t *Task, fn TaskFunc) {
	err := callTask(ctx, t, fn)
	if !t.scheduled {
		j.arrive(ctx, t, false) // arrives with no requests; never waits
	}
	err = errors.Join(err, t.finish())
	j.det.finished(t.id)
	if err != nil {
		j.fail(err)
	}
}

// callTask runs fn, turning a panic into an error.
func callTask(ctx context.Context, t *Task, fn TaskFunc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("orwl: task %d panicked: %v\n%s", t.id, p, debug.Stack())
		}
	}()
	return fn(ctx, t)
}

// arrive is the schedule barrier. The last task to arrive places every request; with
// requests false the task (which has returned) brings none and does not wait.
func (j *job) arrive(ctx context.Context, t *Task, requests bool) error {
	j.mu.Lock()
	if requests {
		j.arrived = append(j.arrived, t)
	}
	j.pending--
	if j.pending == 0 {
		j.schedErr = j.schedule()
		close(j.scheduled)
	}
	j.mu.Unlock()
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

// schedule reports the init-phase mistakes of every task, or places every declared request
// in the global order; j.mu held, every task arrived.
func (j *job) schedule() error {
	slices.SortFunc(j.arrived, func(a, b *Task) int { return a.id - b.id })
	var problems []error
	for _, t := range j.local {
		problems = append(problems, t.problems...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("orwl: schedule: %w", errors.Join(problems...))
	}
	for _, t := range j.arrived {
		for _, h := range t.inserts {
			if err := h.Request(); err != nil {
				return err
			}
		}
		t.inserts = nil
	}
	for _, l := range j.locs {
		if err := l.schedule(); err != nil {
			return err
		}
	}
	return nil
}
