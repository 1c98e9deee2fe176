package orwl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// DeadlockError is a cycle of waits in which every task is blocked in Acquire on a request
// whose grant is held by the next task of the cycle. errors.Is(err, ErrDeadlock) holds.
type DeadlockError struct {
	Cycle []Wait
}

// Wait is one step of a deadlock cycle: Task waits for Mode access to Location at FIFO
// position Pos, and the grant is held by task Holder.
type Wait struct {
	Task     int
	Location string
	Mode     fifo.Mode
	Pos      int
	Holder   int
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("orwl: deadlock: ")
	for i, w := range e.Cycle {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "task %d waits to %s %s (position %d), held by task %d",
			w.Task, w.Mode, w.Location, w.Pos, w.Holder)
	}
	return b.String()
}

// Is reports whether target is ErrDeadlock.
func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// waiting is a task blocked in Acquire.
type waiting struct {
	h *handle.Handle
	t handle.Ticket
}

// detector finds deadlocks without timers: when every running task is blocked in Acquire and
// none of their requests is granted, nobody is left to release anything. Blocking and
// unblocking are a few atomic operations; the full check runs only when the counts say that
// every running task is blocked.
type detector struct {
	slots   []atomic.Pointer[waiting] // by task id; nil when the task is not blocked
	blocked atomic.Int64
	running atomic.Int64
	gen     atomic.Uint64 // counts every block, unblock and finish
	report  func(error)

	mu    sync.Mutex // serialises checks
	fired bool
}

// holderTask returns the task that made r: a local handle's or a remote one's.
func holderTask(r *fifo.Request) int {
	if s, ok := r.Tag.(*served); ok {
		return s.task
	}
	return r.Tag.(*handle.Handle).Spec().Task
}

// finishedTask marks the slot of a task that has returned.
var finishedTask = &waiting{}

// The order of the steps below matters for check: a task's releases happen before the
// generation moves when it blocks or finishes, and after it moves when it unblocks.

func (d *detector) block(task int, w *waiting) {
	d.gen.Add(1)
	d.slots[task].Store(w)
	if d.blocked.Add(1) == d.running.Load() {
		d.check()
	}
}

func (d *detector) unblock(task int) {
	d.slots[task].Store(nil)
	d.gen.Add(1)
	d.blocked.Add(-1)
}

func (d *detector) finished(task int) {
	d.gen.Add(1)
	d.slots[task].Store(finishedTask)
	if n := d.running.Add(-1); n > 0 && d.blocked.Load() == n {
		d.check()
	}
}

// check reports a deadlock when every running task is blocked on a request that is not
// granted. Nothing can change then: grants come only from releases, and every task that
// could release is blocked. The generation count proves that no task moved while the check
// looked at them.
func (d *detector) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	gen := d.gen.Load()
	if d.fired || d.running.Load() == 0 || d.blocked.Load() != d.running.Load() {
		return
	}
	for task := range d.slots { // a quick look first: most checks end here
		w := d.slots[task].Load()
		if w == nil {
			return // running, or a task of another process: this check sees one process only
		}
		if lt, ok := w.t.(*localTicket); w != finishedTask && (!ok || lt.Granted()) {
			return
		}
	}
	waits := map[int]*waiting{}
	for task := range d.slots {
		w := d.slots[task].Load()
		if w == nil {
			return
		}
		if w != finishedTask {
			waits[task] = w
		}
	}
	if len(waits) == 0 {
		return // the last tasks finished meanwhile
	}
	holder := make(map[int]int, len(waits)) // task -> a task holding what it waits for
	for task, w := range waits {
		w.t.(*localTicket).Blockers(func(r *fifo.Request) {
			if _, seen := holder[task]; !seen {
				holder[task] = holderTask(r)
			}
		})
		if _, ok := holder[task]; !ok {
			return // granted meanwhile
		}
	}
	if d.gen.Load() != gen {
		return // somebody moved: whoever blocks last checks again
	}
	err := cycleError(holder, func(task int) Wait {
		spec := waits[task].h.Spec()
		return Wait{Task: task, Location: spec.Location, Mode: spec.Mode, Pos: spec.Pos}
	})
	d.fired = true
	d.report(err)
}

// cycleError follows holder, in which every blocked task points to a blocked task holding
// what it waits for, from the smallest task (for a stable report) until it runs into a
// cycle, and describes that cycle.
func cycleError(holder map[int]int, describe func(task int) Wait) *DeadlockError {
	start := slices.Min(slices.Collect(maps.Keys(holder)))
	order := map[int]int{}
	var path []int
	for task := start; ; task = holder[task] {
		if i, seen := order[task]; seen {
			path = path[i:]
			break
		}
		order[task] = len(path)
		path = append(path, task)
	}
	err := &DeadlockError{}
	for _, task := range path {
		w := describe(task)
		w.Holder = holder[task]
		err.Cycle = append(err.Cycle, w)
	}
	return err
}
