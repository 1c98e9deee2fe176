package orwl

import (
	"fmt"
	"sync"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// remoteQueue is the proxy of a location owned by another process. Its mirror holds the
// data the last grant brought; it is reused across iterations. The owner knows which
// version each mirror holds and sends the data only when it is newer. A mirror's buffer
// is given up when nothing reads it before the data changes (mirror.go).
type remoteQueue struct {
	r       *requester
	owner   int
	loc     uint32
	mirror  []byte   // 8-byte aligned, never nil; written by a grant's data or under a write grant
	version uint64   // the version the mirror holds (0: none)
	stale   [][]byte // mirrors that Resize replaced, freed at the write grant's release (buffers.resize)

	// batch holds the grants received with more set, until the last of their FIFO operation
	// comes (used by the reader of the owner's connection only); grantMu is held while a
	// batch's latches are granted, so Granted sees all of them or none, and guards held and
	// recycle (lock order: node.go).
	batch   []*remoteTicket
	grantMu sync.Mutex
	held    int  // grants of the queue delivered and not given back
	recycle bool // the last batch said recycle: the mirror is stale before its next grant
	guarded bool // the mirror is read-only: read grants hold it, in a checked job

	// sendMu orders the requests on the queue with the release that gives the mirror up
	// (givenBack), and guards active: a request sent after that release finds the owner
	// knowing that the mirror holds nothing. Messages are only queued under it, never
	// written (see transport.Mesh.Flush). Lock order: node.go.
	sendMu sync.Mutex
	active int // tickets requested and not given back
	// next is the request of an iterative handle's next round (rule 6), not sent yet: the
	// release of the handle's grant carries it (releaseMsg.next), one message instead of
	// two; a request of q made before that release sends it first (rule 14).
	next *remoteTicket
}

// requester is this process's side of its requests on the locations of other processes:
// it sends the requests and releases of their tickets (on the Requester connections) and
// receives their grants.
type requester struct {
	j    *job
	mesh *transport.Mesh

	mu      sync.Mutex      // guards tickets, freeIDs and lost (lock order: node.go)
	tickets []*remoteTicket // by id (0 unused)
	freeIDs []uint64        // ids of retired tickets, handed out again
	lost    []error         // by rank, once lost
	spare   spareMirrors

	// sunk is, by owner rank, the ticket whose grant's data grantSink found a place for,
	// which the grant's delivery (granted) then takes without looking it up again: the
	// Sink and the Handle of one message are called one after the other by whoever reads
	// the owner's connection (used by that reader only).
	sunk []sunkGrant
}

// sunkGrant is a ticket that grantSink found for the data of a grant.
type sunkGrant struct {
	id uint64
	t  *remoteTicket
}

// remoteTicket is a request of this process on a remote location.
type remoteTicket struct {
	ticketBase
	q       *remoteQueue
	id      uint64 // its number in requester.tickets and at the owner; 0 once retired
	active  bool   // requested and not yet released; guarded by requester.mu
	version uint64 // the version the grant carried

	grantFlow, releaseFlow trace.FlowID // trace arrows carried by the grant and the release
	transfer               trace.Span   // the grant's data arriving
}

// newTicket registers a new ticket of q under a free id; r.mu held.
func (r *requester) newTicket(q *remoteQueue) *remoteTicket {
	t := &remoteTicket{q: q}
	t.self, t.j = t, r.j
	if k := len(r.freeIDs); k > 0 {
		t.id = r.freeIDs[k-1]
		r.freeIDs = r.freeIDs[:k-1]
		r.tickets[t.id] = t
	} else {
		t.id = uint64(len(r.tickets))
		r.tickets = append(r.tickets, t)
	}
	return t
}

// ticket returns the active ticket numbered id, or nil.
func (r *requester) ticket(id uint64) *remoteTicket {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= uint64(len(r.tickets)) || r.tickets[id] == nil || !r.tickets[id].active {
		return nil
	}
	return r.tickets[id]
}

// Request implements handle.Queue: it sends the request to the owner at once, but for the
// request of an iterative handle's next round, which goes with the release of its grant
// (see remoteQueue.next). A released ticket of the same handle is reused with its id, so
// the owner reuses its entry too.
func (q *remoteQueue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	r := q.r
	t, _ := reuse.(*remoteTicket)
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	r.mu.Lock()
	if err := r.lost[q.owner]; err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if t == nil || t.id == 0 || t.active {
		t = r.newTicket(q)
		t.h, t.spec = h, h.Spec() // a reused ticket is h's own (Queue.Request), and the deadlock watch reads it
	}
	t.active = true
	q.active++
	t.latch.Start()
	r.mu.Unlock()
	live := r.j.requestsLive.Load()
	t.rnd = r.j.round(t.spec.Iterative, h.Acquires())
	err := q.sendNext()
	switch {
	case err != nil:
	case live && t.spec.Iterative:
		// The request of an iterative handle's next round, made in Acquire while the
		// handle holds the grant of the round before: not sent yet (see remoteQueue.next).
		q.next = t
		return t, nil
	default:
		m := t.request(!live)
		err = r.mesh.Send(q.owner, transport.Requester, m.header(), nil)
	}
	if err != nil {
		r.mu.Lock()
		t.active = false
		q.active--
		r.mu.Unlock()
		return nil, err
	}
	return t, nil
}

// request is t's request message; initial: declared in the init phase.
func (t *remoteTicket) request(initial bool) requestMsg {
	return requestMsg{loc: t.q.loc, ticket: t.id, mode: t.spec.Mode, initial: initial, pos: t.spec.Pos, task: t.spec.Task, round: t.rnd}
}

// sendNext queues the request waiting in q.next, if any, on the connection without writing
// it: the next message written there takes it along, at the latest the release of its
// handle's grant, which is still to come. q.sendMu held.
func (q *remoteQueue) sendNext() error {
	t := q.next
	if t == nil {
		return nil
	}
	q.next = nil
	m := t.request(false)
	return q.r.mesh.SendAhead(q.owner, transport.Requester, m.header(), nil)
}

func (t *remoteTicket) Latch() *handle.Latch { return &t.latch }

// Granted reports whether t's grant arrived; one that is being delivered with others of its
// FIFO operation (requester.granted) is waited for.
func (t *remoteTicket) Granted() bool {
	if t.latch.Granted() {
		return true
	}
	t.q.grantMu.Lock()
	defer t.q.grantMu.Unlock()
	return t.latch.Granted()
}

func (t *remoteTicket) Data() []byte { return t.q.mirror }

func (t *remoteTicket) Resize(n int) ([]byte, error) {
	q := t.q
	return q.r.j.bufs.resize(&q.mirror, &q.stale, n), nil
}

// Release gives the grant back to the owner, with the data when it was a write.
func (t *remoteTicket) Release() error {
	return t.q.r.sendRelease(t, releaseMsg{data: t.h.Mode() == fifo.Write}, nil, true)
}

// Cancel gives a grant that had arrived back now, unchanged, and one that has not as soon
// as it arrives (see granted).
func (t *remoteTicket) Cancel() {
	r := t.q.r
	if t.latch.Cancel() {
		r.sendRelease(t, releaseMsg{}, nil, true)
		return
	}
	if t.latch.State() == handle.LatchFailed {
		t.q.sendMu.Lock()
		r.mu.Lock()
		if t.active {
			t.active = false
			t.q.active--
		}
		r.mu.Unlock()
		t.q.sendMu.Unlock()
	}
}

// sendRelease ends t's access at the owner with m (data: the mirror goes back as the new
// data; failed: payload says why); onTask: on a task's goroutine, which writes a small
// release itself. A ticket that will not be requested again (a one-shot
// handle's, a cancelled or failed one's) is retired and its id handed out again, after the
// release is on its way: a later request with the same id reaches the owner after it. In a
// failed job nothing is sent: the owner fails with the job, and hands nothing on.
func (r *requester) sendRelease(t *remoteTicket, m releaseMsg, payload []byte, onTask bool) error {
	q := t.q
	q.sendMu.Lock()
	r.mu.Lock()
	if !t.active {
		r.mu.Unlock()
		q.sendMu.Unlock()
		return fifo.ErrNotGranted
	}
	t.active = false
	q.active--
	if r.j.failed.Load() {
		r.mu.Unlock()
		q.sendMu.Unlock()
		return nil
	}
	retire := !t.spec.Iterative || m.failed || t.latch.State() == handle.LatchCancelled
	r.mu.Unlock()
	m.loc, m.ticket, m.flow = q.loc, t.id, t.releaseFlow
	if next := q.next; next != nil && next.h == t.h {
		m.next, q.next = next.id, nil // the owner places it first (rule 6)
	}
	if m.data {
		payload = q.mirror
		q.version = t.version + 1 // what the owner's data becomes
		r.j.bufs.freeStale(&q.stale)
	}
	m.dropped = q.givenBack(!m.data)
	// Queued under sendMu, so that it goes before any later request of q, and written
	// after: a write that waits for room in the connection holds up no request.
	err := r.mesh.SendAhead(q.owner, transport.Requester, m.header(), payload)
	q.sendMu.Unlock()
	if err == nil {
		err = r.mesh.Flush(q.owner, transport.Requester, onTask)
	}
	if retire {
		r.mu.Lock()
		r.tickets[t.id] = nil
		r.freeIDs = append(r.freeIDs, t.id)
		t.id = 0
		r.mu.Unlock()
	}
	return err
}

// granted completes a remote ticket: the payload, if any, is already in the mirror.
func (r *requester) granted(from int, m grantMsg, payload []byte) error {
	var t *remoteTicket
	if s := &r.sunk[from]; m.data && s.id == m.ticket && s.t != nil {
		t, *s = s.t, sunkGrant{}
	} else {
		t = r.ticket(m.ticket)
	}
	if t == nil || t.q.owner != from {
		return fmt.Errorf("grant of unknown ticket %d", m.ticket)
	}
	if m.refused {
		t.latch.Fail(fmt.Errorf("rank %d refused the request: %s", from, payload))
		return nil
	}
	q := t.q
	if m.data {
		r.j.bufs.resizeKeep(&q.mirror, m.size, r.spare.take) // the payload is there; this sets the size, 0 included
		q.version = m.version
	} else if q.version != m.version {
		return fmt.Errorf("grant of %s without data: this process's copy holds version %d, not %d", r.j.locationAt(m.loc), q.version, m.version)
	}
	t.transfer.End()
	t.transfer = trace.Span{}
	t.version, t.grantFlow = m.version, m.flow
	q.batch = append(q.batch, t)
	if m.more {
		return nil
	}
	// The grants of one FIFO operation reach their latches together (see Granted).
	var cancelled []*remoteTicket
	q.grantMu.Lock()
	q.held += len(q.batch)
	q.recycle = m.recycle
	if q.batch[0].spec.Mode == fifo.Read { // a read group, or a write alone
		q.guard(true)
	}
	for _, b := range q.batch {
		if !b.latch.Grant() {
			cancelled = append(cancelled, b)
		}
	}
	q.grantMu.Unlock()
	clear(q.batch)
	q.batch = q.batch[:0]
	for _, b := range cancelled { // cancelled meanwhile: the cancellation wins, give it back
		r.sendRelease(b, releaseMsg{}, nil, false)
	}
	return nil
}
