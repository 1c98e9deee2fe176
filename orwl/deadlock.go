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
// whose grant is held by the next task of the cycle, or granted to it and not yet acquired.
// errors.Is(err, ErrDeadlock) holds.
type DeadlockError struct {
	Cycle []Wait
}

// Wait is one step of a deadlock cycle: Task waits for Mode access to Location at FIFO
// position Pos, and the grant is task Holder's, for its request at position HolderPos,
// which it holds or not (Hold). The holder is the task of the next step.
type Wait struct {
	Task      int
	Location  string
	Mode      Mode
	Pos       int
	Holder    int
	HolderPos int
	Hold      Hold
}

// Hold says whether the holder of a grant acquired it.
type Hold uint8

const (
	// HoldUnknown: granted; whether the holder acquired it is not known (a one-shot handle,
	// or an iterative handle of another process whose next request has not come yet).
	HoldUnknown Hold = iota
	// Held: acquired, the holder is in its section.
	Held
	// GrantedOnly: granted, not yet acquired.
	GrantedOnly
)

// Error lists the cycle (every task, what it waits for, and who holds it or was granted
// it), then the rule of the discipline that the cycle breaks: in every iteration, a task
// takes its handles in order of position and nests sections only of the same position.
func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("orwl: deadlock: ")
	var nested, unordered, unknown []string
	for i, w := range e.Cycle {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "task %d waits to %s %s (position %d), ", w.Task, w.Mode, w.Location, w.Pos)
		switch w.Hold {
		case Held:
			fmt.Fprintf(&b, "held by task %d (position %d)", w.Holder, w.HolderPos)
		case GrantedOnly:
			fmt.Fprintf(&b, "granted to task %d (position %d, not yet acquired)", w.Holder, w.HolderPos)
		default:
			fmt.Fprintf(&b, "granted to task %d (position %d)", w.Holder, w.HolderPos)
		}
		waits := e.Cycle[(i+1)%len(e.Cycle)].Pos // the holder's own wait
		switch {
		case w.HolderPos == waits:
		case w.Hold == Held:
			nested = append(nested, fmt.Sprintf("task %d holds position %d while it acquires position %d", w.Holder, w.HolderPos, waits))
		case w.Hold == GrantedOnly && w.HolderPos < waits:
			unordered = append(unordered, fmt.Sprintf("task %d acquires position %d before position %d", w.Holder, waits, w.HolderPos))
		default:
			unknown = append(unknown, fmt.Sprintf("task %d waits for position %d while granted position %d", w.Holder, waits, w.HolderPos))
		}
	}
	for _, r := range []struct {
		rule  string
		tasks []string
	}{
		{"sections nest only handles of the same position", nested},
		{"a task takes its handles in order of position", unordered},
		{"a task takes its handles in order of position, and nests sections only of the same position", unknown},
	} {
		if len(r.tasks) > 0 {
			fmt.Fprintf(&b, "; broken rule: %s (%s)", r.rule, strings.Join(r.tasks, ", "))
		}
	}
	return b.String()
}

// Is reports whether target is ErrDeadlock.
func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// describeWait fills in w the holders of the grant that r waits for and l's count of
// grants, under l's lock. It reports false when r is not waiting (granted meanwhile, or not
// in the FIFO).
func (l *location) describeWait(r *fifo.Request, w *waitRecord) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := r.State(); s != fifo.Queued {
		return false
	}
	w.Loc, w.grants = int(l.index), l.grants
	w.Holders = l.holders()
	return true
}

// holder is a request of l's granted head entry as deadlock detection reports it.
type holder struct {
	Task, Pos int
	Hold      Hold `json:",omitempty"`
}

// holders describes the requests of l's granted head entry that have not released, under
// l.mu. An iterative handle requests its next round when it acquires (rule 6), so its
// grant is held exactly when that request is in the FIFO: always known for a handle of this
// process, and for one of another process once its next request came (it travels with the
// release, or with a later request: remote.go). Whether a one-shot handle acquired its
// grant is not known.
func (l *location) holders() []holder {
	var hs []holder
	var grants []*fifo.Request
	l.fifo.Holders(func(r *fifo.Request) {
		hs = append(hs, holder{Task: r.Tag.(queued).task(), Pos: requestPos(r)})
		grants = append(grants, r)
	})
	for i, g := range grants {
		if g.Tag.(queued).round() < 0 {
			continue // one-shot
		}
		if _, local := g.Tag.(*localTicket); local {
			hs[i].Hold = GrantedOnly
		}
		l.fifo.Each(func(r *fifo.Request) {
			if r != g && nextRound(g, r) {
				hs[i].Hold = Held
			}
		})
	}
	return hs
}

// requestPos is the FIFO position that the request r of a location's FIFO was made for.
func requestPos(r *fifo.Request) int {
	switch q := r.Tag.(type) {
	case *localTicket:
		return q.spec.Pos
	case *served:
		return q.pos
	case *pairServed:
		return q.l.pair.r.pos
	}
	return 0
}

// nextRound reports whether r is the request of the round after g's, of the same iterative
// handle.
func nextRound(g, r *fifo.Request) bool {
	switch q := g.Tag.(type) {
	case *localTicket:
		n, ok := r.Tag.(*localTicket)
		return ok && n.h == q.h && n.rnd == q.rnd+1
	case *served:
		n, ok := r.Tag.(*served)
		return ok && n.from == q.from && n.taskID == q.taskID && n.pos == q.pos && n.rnd == q.rnd+1 &&
			n.req.Mode() == q.req.Mode()
	case *pairServed:
		n, ok := r.Tag.(*pairServed)
		return ok && n.rnd == q.rnd+1
	}
	return false
}

// detector knows what each task of this process is blocked on, at no cost to the tasks: a
// task publishes the ticket it is about to wait on (a store only when it is not among the
// last few it published, so an iterating task stores nothing: an iterative handle alternates
// between two tickets), and the ticket's latch says whether it is parked
// (handle.Latch.Parked). The job's watch goroutine looks every watchPeriod (see look
// and deadlock_dist.go).
type detector struct {
	slots []slot      // by task id
	moves atomic.Bool // a protocol event that may unblock somebody came since the last look (remote grants, releases, requests)

	// The previous look; watch goroutine only.
	last      []waitKey
	lastStuck bool
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

// block publishes that task is about to wait on t, and returns the flag that says while the
// task polls for its grant (see idle).
func (d *detector) block(task int, t *ticketBase) (polling *atomic.Bool) {
	s := &d.slots[task]
	for i := range s.waits {
		if s.waits[i].Load() == t {
			return &s.polling
		}
	}
	s.waits[s.next].Store(t)
	s.next = (s.next + 1) % slotWaits
	return &s.polling
}

// moved records a message that may unblock somebody (a request, a grant or a release
// received): a process that receives one is not stuck. It writes the flag only when the
// watch has cleared it, so that a stream of messages reads a cache line that stays shared.
func (d *detector) moved() {
	if !d.moves.Load() {
		d.moves.Store(true)
	}
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
		if d.slots[t.id].polling.Load() { // the quick look first: the asking task polls
			blocked = true
			continue
		}
		switch w, done := d.blockedOn(t.id); {
		case done:
		case w != nil:
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
	moves := d.moves.Swap(false)
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
	moved = stuck != d.lastStuck || !slices.Equal(cur, d.last) || moves
	if moved {
		d.epoch++
	}
	d.last, d.lastStuck = cur, stuck
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

// cycleError follows holders, in which every blocked task points to the request of a
// blocked task that holds, or was granted, what it waits for, from the smallest task (for a
// stable report) until it runs into a cycle, and describes that cycle.
func cycleError(holders map[int]holder, describe func(task int) Wait) *DeadlockError {
	start := slices.Min(slices.Collect(maps.Keys(holders)))
	order := map[int]int{}
	var path []int
	for task := start; ; task = holders[task].Task {
		if i, seen := order[task]; seen {
			path = path[i:]
			break
		}
		order[task] = len(path)
		path = append(path, task)
	}
	err := &DeadlockError{}
	for _, task := range path {
		w, h := describe(task), holders[task]
		w.Holder, w.HolderPos, w.Hold = h.Task, h.Pos, h.Hold
		err.Cycle = append(err.Cycle, w)
	}
	return err
}
