package orwl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
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

// Error lists the cycle: every task, what it waits for and who holds it.
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

// detector knows what each task of this process is blocked on, at no cost to the tasks: a
// task publishes the ticket it is about to wait on (a store only when it is not among the
// last few it published, so an iterating task stores nothing: an iterative handle alternates
// between two tickets), and the ticket's latch says whether it is parked
// (handle.Latch.Parked). The job's watch goroutine looks every watchPeriod (see look
// and deadlock_dist.go).
type detector struct {
	slots []slot        // by task id
	moves atomic.Uint64 // protocol events that may unblock somebody (remote grants, releases, requests)

	// The previous look; watch goroutine only.
	last      []waitKey
	lastStuck bool
	lastMoves uint64
	epoch     uint64 // how many looks found something moved
}

// slot is what one task waits or last waited on, in a cache line of its own: the tickets of
// its last slotWaits waits. A task is parked on one ticket at a time, so a parked one among
// them is the task's wait.
type slot struct {
	waits   [slotWaits]atomic.Pointer[ticketBase]
	next    uint8       // the entry of waits that the next new ticket replaces; the task's goroutine only
	done    atomic.Bool // the task has returned
	polling atomic.Bool // the task polls for the grant it waits for (ticketBase.Waiting)
	_       [20]byte
}

// slotWaits is how many tickets a slot remembers: those of two iterative handles.
const slotWaits = 4

// waitKey is one wait as two looks compare it: the ticket, and the count of grants of its
// location, so that a task granted and parked again on the same (reused) ticket in between
// counts as moved.
type waitKey struct {
	t      *ticketBase
	grants uint64
}

// block publishes that task is about to wait on t.
func (d *detector) block(task int, t *ticketBase) {
	s := &d.slots[task]
	for i := range s.waits {
		if s.waits[i].Load() == t {
			return
		}
	}
	s.waits[s.next].Store(t)
	s.next = (s.next + 1) % slotWaits
}

func (d *detector) finished(task int) { d.slots[task].done.Store(true) }

// blockedOn returns the ticket task is parked on, nil while it runs; done once it returned.
func (d *detector) blockedOn(task int) (t *ticketBase, done bool) {
	s := &d.slots[task]
	if s.done.Load() {
		return nil, true
	}
	for i := range s.waits {
		if t = s.waits[i].Load(); t != nil && t.latch.Parked() {
			return t, false
		}
	}
	return nil, false
}

// idle reports whether one task of tasks at least waits in Acquire (parked, or polling for
// its grant) and every other one waits or has returned: the process has nothing to compute
// until a grant comes.
func (d *detector) idle(tasks []*Task) bool {
	blocked := false
	for _, t := range tasks {
		switch w, done := d.blockedOn(t.id); {
		case done:
		case w != nil || d.slots[t.id].polling.Load():
			blocked = true
		default:
			return false
		}
	}
	return blocked
}

// look describes what the tasks of tasks wait for. It reports stuck when every one of them
// is parked on a request that is not granted, or has returned (a process without running
// tasks is stuck), with their waits; and moved when that differs from the previous look (or
// the protocol moved, or the previous look was not stuck), in which case the epoch grows.
// Two looks in a row that find every task stuck and nothing moved mean that nobody can
// release anything here: grants come only from releases.
func (d *detector) look(tasks []*Task) (waits []waitRecord, stuck, moved bool) {
	moves := d.moves.Load()
	var cur []waitKey
	stuck = true
	for _, t := range tasks {
		w, done := d.blockedOn(t.id)
		if done {
			continue
		}
		if w == nil {
			stuck = false
			break
		}
		spec := &w.spec
		rec := waitRecord{Task: t.id, Pos: spec.Pos, Write: spec.Mode == fifo.Write}
		if !w.self.describeWait(&rec) {
			stuck = false // granted meanwhile
			break
		}
		waits = append(waits, rec)
		cur = append(cur, waitKey{w, rec.grants})
	}
	if !stuck {
		waits, cur = nil, nil
	}
	moved = stuck != d.lastStuck || !slices.Equal(cur, d.last) || moves != d.lastMoves
	if moved {
		d.epoch++
	}
	d.last, d.lastStuck, d.lastMoves = cur, stuck, moves
	return waits, stuck, moved
}

// checkLocal reports a deadlock of a job that runs in this process alone: every task that
// has not returned is blocked, nothing moved since the previous look, and following the
// holders of what they wait for runs into a cycle.
func (j *job) checkLocal() {
	waits, stuck, moved := j.det.look(j.local)
	if !stuck || moved || len(waits) == 0 {
		return
	}
	if cycle := j.findCycle([]*stuckReport{{Waits: waits}}); cycle != nil {
		j.fail(cycle)
	}
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
