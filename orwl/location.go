package orwl

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
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
// handle.Queue of the local handles on it (local.go); the node places remote handles'
// requests in it (owner.go).
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

// ticketBase is what local and remote tickets share: the grant's latch, the handle that made
// the request, and the ticket itself. The deadlock detector's slot points to it. It is here,
// in the one file that a grant of either kind reads; ticket.go has the rest of what they
// share.
type ticketBase struct {
	latch handle.Latch
	h     *handle.Handle
	spec  handle.Spec // h's, read without copying it on every request
	rnd   int         // the round of its request (see queued.round)
	self  ticket
	j     *job
}

// Waiting implements handle.Ticket: it tells the deadlock detector that the ticket's task
// is about to wait on it (detector.block), then, in a job of several processes, reads the
// messages of processes of this host on the waiting task's goroutine while they come
// quickly (transport.Mesh.Poll): a grant that comes in one, or the release that causes it,
// then needs no wake-up of the task. Meanwhile the task counts as waiting (detector.idle),
// so that, when no other task of the process computes, the task and the readers poll as
// long as an idle process's readers do, not only Config.Spin: a grant a little later than
// that would otherwise cost two wake-ups, which delay the task's next release past its
// neighbours' Spin in turn, iteration after iteration.
func (b *ticketBase) Waiting(ctx context.Context) {
	polling := b.j.det.block(b.spec.Task, b)
	n := b.j.node
	if n == nil {
		return
	}
	polling.Store(true)
	n.mesh.Poll(b.settled, ctx.Done())
	polling.Store(false)
}

// settled reports whether the latch is no longer pending.
func (b *ticketBase) settled() bool { return b.latch.State() != handle.LatchPending }
