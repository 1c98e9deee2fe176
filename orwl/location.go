package orwl

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/trace"
)

// Location names one location of the job: the location called Name of task Task.
type Location struct {
	Task int
	Name string
}

// String names l as errors do: `task 3 "bound"`.
func (l Location) String() string { return fmt.Sprintf("task %d %q", l.Task, l.Name) }

// location is a location owned by this process: its FIFO and its data. It is the
// handle.Queue of the local handles on it; the node places remote handles' requests in it.
//
// Every FIFO operation runs under mu and returns the requests it granted; they are delivered
// (a local waiter woken, a grant sent to another process) after mu is released, by the
// goroutine that did the operation: onTask says whether it is a task's, which may write a
// grant to the network itself (transport.Mesh.SendNow), or a connection's reader, which
// must not.
type location struct {
	id    Location
	index uint32 // its number in the job, as it travels on the wire
	j     *job

	mu        sync.Mutex // guards fifo to ckpt, version and readers (lock order: node.go)
	fifo      fifo.FIFO
	err       error            // the job's failure: nothing is granted any more
	scheduled bool             // the initial requests have been placed in the FIFO
	pending   []pendingRequest // requests that came before the schedule
	grants    uint64           // FIFO operations that granted something (see waitKey)
	ckpt      locationCkpt     // its part in the checkpoints (checkpoint_process.go)

	data    []byte   // 8-byte aligned; written only under a write grant (or before the schedule)
	version uint64   // counts the write releases; changed under mu by the releasing writer
	readers int      // read grants of this process's tasks that hold data, in a checked job; under mu
	stale   [][]byte // buffers that Resize replaced, freed at the write grant's release (buffers.resize)

	// sendMu orders the grants sent to other processes, and guards mirrors: the version of
	// the data each process's mirror holds, by rank (nil in a job of one process). Lock
	// order: node.go.
	sendMu  sync.Mutex
	mirrors []uint64

	fq       *trace.FIFO   // the trace of this FIFO; nil when tracing is off
	lastFlow atomic.Uint64 // the trace flow of the last release, for the grant it causes
}

// pendingRequest is a request that came before the schedule placed the initial ones.
type pendingRequest struct {
	initial   bool // declared in the init phase (else a later request that arrived early)
	pos, task int
	req       *fifo.Request
	mode      fifo.Mode
}

// queued is a request in a FIFO of this process, found through its fifo.Request's Tag: a
// local ticket, or a request served for a handle of another process.
type queued interface {
	// granted delivers the grant, after the location's lock is released (onTask: on a task's
	// goroutine); more says that another request of the same process is granted by the same
	// FIFO operation and delivered after it.
	granted(onTask, more bool)
	// failed delivers the job's failure to a request that is still waiting.
	failed(err error)
	// task is the task whose handle made the request.
	task() int
	// round is the round of an iterative handle's request (checkpoint.go), -1 for others.
	round() int
	// remote says which process and ticket a request served for another process is (ok
	// false for a local ticket).
	remote() (from int, ticket uint64, ok bool)
}

// grantBuf is how many grants one FIFO operation collects on the stack before it allocates:
// a read group of up to grantBuf readers is handed on without allocating.
const grantBuf = 16

// deliver hands every request of granted its grant. It finds itself whether more grants go
// to the same process (moreFor): passing the rest of granted to the interface method would
// move granted, kept on the caller's stack (grantBuf), to the heap.
func deliver(granted []*fifo.Request, onTask bool) {
	for i, r := range granted {
		if t, ok := r.Tag.(*localTicket); ok { // the common case, called directly
			t.granted(onTask, false)
			continue
		}
		r.Tag.(queued).granted(onTask, moreFor(r, granted[i+1:]))
	}
}

// moreFor reports whether r is a request of another process and a request of rest is of the
// same process: their grants then go together (see requester.granted).
func moreFor(r *fifo.Request, rest []*fifo.Request) bool {
	from, _, ok := r.Tag.(queued).remote()
	if !ok {
		return false
	}
	for _, o := range rest {
		if f, _, ok := o.Tag.(queued).remote(); ok && f == from {
			return true
		}
	}
	return false
}

// enqueue places r in the FIFO, or, before the schedule, keeps it for the schedule. It fails
// once the job has failed.
func (l *location) enqueue(r *fifo.Request, mode fifo.Mode, initial bool, pos, task int, onTask bool) error {
	l.fq.Request(task, mode, pos)
	var buf [grantBuf]*fifo.Request
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	if !l.ckpt.rounds && r.Tag.(queued).round() >= 0 {
		l.ckpt.rounds = true
	}
	if !l.scheduled {
		l.pending = append(l.pending, pendingRequest{initial, pos, task, r, mode})
		l.mu.Unlock()
		return nil
	}
	granted, err := l.fifo.Enqueue(r, mode, buf[:0])
	l.granting(granted)
	l.mu.Unlock()
	deliver(granted, onTask)
	return err
}

// granting counts a FIFO operation that granted something, says for each grant to another
// process whether it may say recycle (served.recyclable), and takes the snapshot of an armed
// checkpoint when the first request of its round is among the granted ones, before any of
// them sees the data (checkpoint.go); l.mu held.
func (l *location) granting(granted []*fifo.Request) {
	if len(granted) == 0 {
		return
	}
	l.grants++
	if l.j.bufs.checked {
		l.guardReads(granted, 1)
	}
	for _, r := range granted {
		if s, ok := r.Tag.(*served); ok {
			s.recycle = s.recyclable()
		}
	}
	if l.ckpt.round == 0 {
		return
	}
	for _, r := range granted {
		if r.Tag.(queued).round() >= l.ckpt.round {
			l.snapshot()
			return
		}
	}
}

// release ends the granted access of r; a write makes a new version of the data, which the
// mirror of process mirror (>= 0: a remote writer sent it back) holds already. In a failed
// job it does nothing: the data a failed job leaves is never handed on.
func (l *location) release(r *fifo.Request, newVersion bool, mirror int, onTask bool) error {
	var buf [grantBuf]*fifo.Request
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil
	}
	if newVersion && r.State() == fifo.Granted {
		l.version++
	}
	version := l.version
	if l.j.bufs.checked && r.State() == fifo.Granted {
		l.guardReads([]*fifo.Request{r}, -1)
	}
	granted, err := l.fifo.Release(r, buf[:0])
	l.granting(granted)
	l.mu.Unlock()
	if mirror >= 0 && err == nil {
		l.sendMu.Lock()
		l.mirrors[mirror] = version
		l.sendMu.Unlock()
	}
	deliver(granted, onTask)
	return err
}

// cancel withdraws r (fifo.FIFO.Cancel), on a task's goroutine: a grant it holds goes back
// unchanged.
func (l *location) cancel(r *fifo.Request) {
	var buf [grantBuf]*fifo.Request
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if l.j.bufs.checked && r.State() == fifo.Granted {
		l.guardReads([]*fifo.Request{r}, -1)
	}
	granted := l.fifo.Cancel(r, buf[:0])
	l.granting(granted)
	l.mu.Unlock()
	deliver(granted, true)
}

// guardReads counts the read grants of this process's tasks among rs, granted (by +1) or
// ended (by -1), in a checked job: the data is read-only while one of them holds it (l.mu
// held, so that a write grant that follows finds it writable again).
func (l *location) guardReads(rs []*fifo.Request, by int) {
	was := l.readers
	for _, r := range rs {
		if _, local := r.Tag.(*localTicket); local && r.Mode() == fifo.Read {
			l.readers += by
		}
	}
	if (was == 0) != (l.readers == 0) {
		l.j.bufs.guard(l.data, l.readers > 0)
	}
}

// fail stops l for good: every request still waiting gets err, and nothing is granted any
// more (a release does nothing), so no task ever sees data that a failed job left behind.
func (l *location) fail(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	var waiting []queued
	l.fifo.Each(func(r *fifo.Request) { waiting = append(waiting, r.Tag.(queued)) })
	for _, p := range l.pending {
		waiting = append(waiting, p.req.Tag.(queued))
	}
	l.pending = nil
	l.mu.Unlock()
	for _, q := range waiting {
		q.failed(err)
	}
}

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

// localTicket is a request on a location of this process.
type localTicket struct {
	ticketBase
	req fifo.Request
	loc *location
}

func (t *localTicket) Latch() *handle.Latch { return &t.latch }

// Granted reports whether the FIFO granted t: the grants of one FIFO operation reach their
// latches one by one after the location's lock, but the FIFO's state is decided under it.
func (t *localTicket) Granted() bool {
	if t.latch.Granted() {
		return true
	}
	l := t.loc
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && t.req.State() == fifo.Granted
}
func (t *localTicket) Data() []byte { return t.loc.data }

func (t *localTicket) Resize(n int) ([]byte, error) {
	l := t.loc
	return l.j.bufs.resize(&l.data, &l.stale, n), nil
}

// Release ends the access; a write makes a new version of the data.
func (t *localTicket) Release() error {
	write := t.h.Mode() == fifo.Write
	if write {
		t.loc.j.bufs.freeStale(&t.loc.stale)
	}
	return t.loc.release(&t.req, write, -1, true)
}

// Cancel withdraws the ticket; a grant that had arrived goes back with the data unchanged.
func (t *localTicket) Cancel() {
	t.latch.Cancel()
	t.loc.cancel(&t.req)
}

// granted wakes the waiter. A latch cancelled meanwhile refuses the grant; its canceller
// gives it back through location.cancel.
func (t *localTicket) granted(bool, bool)          { t.latch.Grant() }
func (t *localTicket) failed(err error)            { t.latch.Fail(err) }
func (t *localTicket) task() int                   { return t.spec.Task }
func (t *localTicket) round() int                  { return t.rnd }
func (t *localTicket) remote() (int, uint64, bool) { return 0, 0, false }
func (t *localTicket) where() uint32               { return t.loc.index }

func (t *localTicket) describeWait(w *waitRecord) bool { return t.loc.describeWait(&t.req, w) }

func (t *localTicket) failGrant(err error) { t.loc.fail(err) }

func (t *localTicket) traceGrant(task int, m fifo.Mode) trace.FlowID {
	t.loc.fq.Grant(task, m)
	return trace.FlowID(t.loc.lastFlow.Load())
}

func (t *localTicket) traceRelease(task int, m fifo.Mode, flow trace.FlowID) {
	t.loc.lastFlow.Store(uint64(flow))
	t.loc.fq.Release(task, m)
}

// Request implements handle.Queue. Before the schedule the request is only recorded; the
// schedule places all of them in the global order.
func (l *location) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	t, _ := reuse.(*localTicket)
	if t == nil || t.req.State() != fifo.Idle {
		t = &localTicket{loc: l, ticketBase: ticketBase{h: h, spec: h.Spec(), j: l.j}}
		t.req.Tag = t
		t.self = t
	}
	// A reused ticket is h's own (Queue.Request), unchanged: the deadlock watch reads t.h.
	spec := &t.spec
	t.rnd = l.j.round(spec.Iterative, h.Acquires())
	t.latch.Start()
	if err := l.enqueue(&t.req, spec.Mode, true, spec.Pos, spec.Task, true); err != nil {
		return nil, err
	}
	return t, nil
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
	if b := l.j.bufs; b.checked && len(l.data) > 0 && !hugemem.Mapped(l.data) {
		// Scale and a restore put data under hugemem.Threshold in Go memory: to pages of
		// its own, which grants can guard.
		guarded := b.alloc(len(l.data))
		copy(guarded, l.data)
		l.data = guarded
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
