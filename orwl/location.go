package orwl

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// location is a location owned by this process: its FIFO and its data, the handle.Queue of
// its local handles (local.go), where the owner places remote handles' requests (owner.go).
// Every FIFO operation runs under mu and returns the requests it granted, which the same
// goroutine delivers after unlocking; onTask says whether it is a task's, which may write a
// grant to the network itself, or a connection's reader, which must not.
type location struct {
	id    Location
	index uint32 // its number in the job, as it travels on the wire
	j     *job

	mu        sync.Mutex // guards fifo to ckpt, version and readers
	fifo      fifo.FIFO
	err       error            // the job's failure: nothing is granted any more
	scheduled bool             // the initial requests have been placed in the FIFO
	pending   []pendingRequest // requests that came before the schedule
	grants    uint64           // FIFO operations that granted something (see waitKey)
	ckpt      locationCkpt     // its part in the checkpoints (checkpoint_process.go)

	data    []byte   // 8-byte aligned; written only under a write grant (or before the schedule)
	version uint64   // counts the write releases; changed under mu by the releasing writer
	readers int      // read grants of this process's tasks that hold data, in a checked job
	stale   [][]byte // buffers that Resize replaced, freed at the write grant's release

	// sendMu orders the grants sent to other processes, and guards mirrors: the version each
	// process's mirror holds, by rank (nil in a job of one process).
	sendMu  sync.Mutex
	mirrors []uint64

	fq       *trace.FIFO   // the trace of this FIFO; nil when tracing is off
	lastFlow atomic.Uint64 // the trace flow of the last release, for the grant it causes
}

// queued is a request in a FIFO of this process, found through its fifo.Request's Tag: a
// local ticket, or a request served for a handle of another process.
type queued interface {
	// granted delivers the grant, after the location's lock is released (onTask: on a task's
	// goroutine); more: a grant of the same FIFO operation to the same process follows.
	granted(onTask, more bool)
	// failed delivers the job's failure to a request that is still waiting.
	failed(err error)
	// task is the task whose handle made the request.
	task() int
	// round is the round of an iterative handle's request (checkpoint.go), -1 for others.
	round() int
	// remote is the process and ticket of a request served for another process (ok false
	// for a local ticket).
	remote() (from int, ticket uint64, ok bool)
}

// grantBuf is how many grants one FIFO operation collects on the stack before it allocates.
const grantBuf = 16

// deliver hands every request of granted its grant. It computes more itself (moreFor):
// passing the rest of granted to an interface method would move it to the heap.
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
	l.ungranting(r)
	granted, err := l.fifo.Release(r, buf[:0])
	l.granting(granted)
	l.mu.Unlock()
	if mirror >= 0 && err == nil {
		l.setMirror(mirror, version)
	}
	deliver(granted, onTask)
	return err
}

// ticketBase is what local and remote tickets share: the grant's latch, the handle that made
// the request, and the ticket itself (the deadlock watch's slot points to it).
type ticketBase struct {
	latch handle.Latch
	h     *handle.Handle
	spec  handle.Spec // h's, read without copying it on every request
	rnd   int         // the round of its request (see queued.round)
	self  ticket
	j     *job
}

// Waiting implements handle.Ticket: it tells the deadlock watch that the task waits
// (detector.block), then, in a job of several processes, reads the messages of processes
// of this host on the task's goroutine while they come quickly (transport.Mesh.Poll), so
// that a grant that comes in one needs no wake-up; meanwhile the task counts as polling.
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
