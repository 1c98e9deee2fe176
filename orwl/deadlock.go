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

// detector knows what each task of this process is blocked on. Blocking and unblocking
// cost a few stores into the task's own slot (its own cache line: tasks on different cores
// do not slow each other down) and allocate nothing; the job's watch goroutine looks at the
// slots every watchPeriod (see look and deadlock_dist.go).
type detector struct {
	slots []slot        // by task id
	moves atomic.Uint64 // protocol events that may unblock somebody (remote grants, releases, requests)

	// The previous look and how many looks found something moved; watch goroutine only.
	last      []uint64
	lastMoves uint64
	epoch     uint64
}

// slot is what one task is blocked on. seq is odd while the task is blocked and grows at
// every block and unblock, so a look that sees the same seq twice knows the task has not
// moved in between; it is finishedSeq once the task has returned. The ticket is published
// before seq, so the watch never reads a half-written wait.
type slot struct {
	seq  atomic.Uint64
	wait atomic.Pointer[ticketBase]
	_    [48]byte // a cache line of its own
}

// finishedSeq marks the slot of a task that has returned.
const finishedSeq = ^uint64(0)

func (d *detector) block(task int, t *ticketBase) {
	s := &d.slots[task]
	if s.wait.Load() != t {
		s.wait.Store(t)
	}
	s.seq.Add(1)
}

func (d *detector) unblock(task int)  { d.slots[task].seq.Add(1) }
func (d *detector) finished(task int) { d.slots[task].seq.Store(finishedSeq) }

// wait returns what task is blocked on, with the slot's seq: ok is false while it runs.
func (d *detector) wait(task int) (t *ticketBase, seq uint64, ok bool) {
	s := &d.slots[task]
	seq = s.seq.Load()
	if seq == finishedSeq || seq%2 == 0 {
		return nil, seq, false
	}
	t = s.wait.Load()
	return t, seq, s.seq.Load() == seq
}

// idle reports whether one task of tasks at least is blocked in Acquire and every other one
// is blocked or has returned: the process has nothing to compute until a grant comes.
func (d *detector) idle(tasks []*Task) bool {
	blocked := false
	for _, t := range tasks {
		switch seq := d.slots[t.id].seq.Load(); {
		case seq == finishedSeq:
		case seq%2 == 1:
			blocked = true
		default:
			return false
		}
	}
	return blocked
}

// look records what the tasks of tasks are blocked on. It reports stuck when every one of
// them is blocked on a request that is not granted, or has returned (a process without
// running tasks is stuck); and moved when that differs from the previous look (or the
// protocol moved), in which case the epoch grows. Two looks in a row that find every task
// stuck and nothing moved mean that nobody can release anything here: grants come only from
// releases.
func (d *detector) look(tasks []*Task) (waits map[int]*ticketBase, stuck, moved bool) {
	cur := make([]uint64, len(tasks))
	moves := d.moves.Load()
	stuck = true
	waits = map[int]*ticketBase{}
	for i, t := range tasks {
		w, seq, blocked := d.wait(t.id)
		cur[i] = seq
		switch {
		case seq == finishedSeq:
		case !blocked || w.latch.Granted():
			stuck = false
		default:
			waits[t.id] = w
		}
	}
	moved = !slices.Equal(cur, d.last) || moves != d.lastMoves
	if moved {
		d.epoch++
	}
	d.last, d.lastMoves = cur, moves
	return waits, stuck, moved
}

// describe is the deadlock report's step of task's wait on t.
func (j *job) describe(task int, t *ticketBase) Wait {
	spec := t.h.Spec()
	return Wait{Task: task, Location: spec.Location, Mode: spec.Mode, Pos: spec.Pos}
}

// checkLocal reports a deadlock of a job that runs in this process alone: every task that
// has not returned is blocked, nothing moved since the previous look, and following the
// holders of what they wait for runs into a cycle.
func (j *job) checkLocal() {
	waits, stuck, moved := j.det.look(j.local)
	if !stuck || moved || len(waits) == 0 {
		return
	}
	holder := make(map[int]int, len(waits)) // task -> a task holding what it waits for
	for task, t := range waits {
		var w waitRecord
		if !t.self.describeWait(&w) || len(w.Holders) == 0 {
			return // granted meanwhile
		}
		holder[task] = w.Holders[0]
	}
	for _, h := range holder {
		if _, blocked := waits[h]; !blocked {
			return // the holder runs: it will release
		}
	}
	j.fail(cycleError(holder, func(task int) Wait { return j.describe(task, waits[task]) }))
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
