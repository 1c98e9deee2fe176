package orwl

import (
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// location is a location owned by this process: its FIFO and its data, the handle.Queue of
// its local handles (local.go), where the owner places remote handles' requests (owner.go).
// A FIFO operation runs under mu; the same goroutine delivers its grants after unlocking,
// onTask saying whether it is a task's, which may write a grant to the network itself, or a
// connection's reader, which must not.
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

	pair *pairOwner // the pair it is (pair.go); nil for a FIFO of messages

	fq       *trace.FIFO   // the trace of this FIFO; nil when tracing is off
	lastFlow atomic.Uint64 // the trace flow of the last release, for the grant it causes
}

// grantBuf is how many grants one FIFO operation collects on the stack before it allocates.
const grantBuf = 16

// deliver hands every request of granted its grant: a local ticket's latch (cancelled
// meanwhile, it refuses the grant, which its canceller gives back), a grant sent to
// another process, which says more when another of the same process follows, or that of a
// dissolved pair's reader (pair.go).
func deliver(granted []*fifo.Request, onTask bool) {
	for i, r := range granted {
		switch t := r.Tag.(type) {
		case *localTicket:
			t.latch.Grant()
		case *served:
			t.granted(onTask, moreFor(t.from, granted[i+1:]))
		case *pairServed:
			t.granted(onTask, moreFor(t.l.pair.rank, granted[i+1:]))
		}
	}
}

// moreFor reports whether a request of rest is served for process from.
func moreFor(from int, rest []*fifo.Request) bool {
	for _, r := range rest {
		switch s := r.Tag.(type) {
		case *served:
			if s.from == from {
				return true
			}
		case *pairServed:
			if s.l.pair.rank == from {
				return true
			}
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
	l.ckpt.rounds = l.ckpt.rounds || r.Tag.(queued).round() >= 0 // looked at until one came
	if !l.scheduled {
		l.pending = append(l.pending, pendingRequest{initial, pos, task, r, mode})
		l.mu.Unlock()
		return nil
	}
	granted := buf[:0]
	if l.pair != nil && !l.pair.dissolved.Load() {
		granted = l.dissolve(granted)
	}
	granted, err := l.fifo.Enqueue(r, mode, granted)
	l.granting(granted)
	l.mu.Unlock()
	deliver(granted, onTask)
	return err
}

// release ends the granted access of r, in one FIFO operation with the placing of next,
// when not nil: the request of r's next round that a remote release carries (its trace
// event recorded already). A write (newVersion) makes a new version of the data, which the
// mirror of process mirror (>= 0: a remote writer sent it back) holds already. In a failed
// job it does nothing: the data a failed job leaves is never handed on.
func (l *location) release(r *fifo.Request, newVersion bool, mirror int, onTask bool, next *served) error {
	var buf [grantBuf]*fifo.Request
	granted := buf[:0]
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil
	}
	if next != nil { // after a granted round: scheduled, and l.ckpt.rounds set
		granted, _ = l.fifo.Enqueue(&next.req, r.Mode(), granted) // next is idle
	}
	if newVersion && r.State() == fifo.Granted {
		l.version++
	}
	version := l.version
	l.ungranting(r)
	granted, err := l.fifo.Release(r, granted)
	l.granting(granted)
	l.mu.Unlock()
	if newVersion && mirror >= 0 && err == nil {
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

// Latch implements handle.Ticket.
func (b *ticketBase) Latch() *handle.Latch { return &b.latch }
