package orwl

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/release"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// remoteQueue is the proxy of a location owned by another process. Its mirror holds the
// data the last grant brought (mirror.go); a grant brings data only when the mirror's
// version is older.
type remoteQueue struct {
	r     *requester
	owner int
	loc   uint32
	batch []*remoteTicket // grants received with more set (the owner's connection's reader only)

	// sendMu orders the requests and releases, queued under it (SendAhead) and flushed after
	// (a request after a release that gave the mirror up finds the owner knowing it); it
	// guards what a request and a release change of the queue and its tickets, and what the
	// mirror counts of its grants; a batch's latches are granted under it, so that Granted
	// sees all or none.
	sendMu sync.Mutex
	mirrorState
	active int           // tickets requested and not given back
	next   *remoteTicket // the next round's request (rule 6), which its handle's release carries

	pair        atomic.Pointer[pairReader]   // the location is a pair (pair.go)
	pairWaiting atomic.Pointer[remoteTicket] // the pair's request that waits for its round
}

// requester is this process's side of its requests on the locations of other processes:
// it sends their requests and releases and receives their grants.
type requester struct {
	j    *job
	mesh *transport.Mesh

	mu      sync.Mutex                  // guards the changes of tickets, freeIDs, lastID and the tickets' ids
	tickets atomic.Pointer[ticketTable] // by id (ids.go)
	freeIDs []uint64                    // ids of retired tickets, handed out again
	lastID  uint64                      // the highest id handed out
	lost    []atomic.Pointer[error]     // by rank, once lost
	spare   spareMirrors
}

// remoteTicket is a request of this process on a remote location.
type remoteTicket struct {
	ticketBase
	q       *remoteQueue
	id      uint64      // its number in the requester's tickets and at the owner; 0 once retired
	active  atomic.Bool // requested and not yet released; changed under q.sendMu
	version uint64      // the version the grant carried

	grantFlow, releaseFlow trace.FlowID // trace arrows carried by the grant and the release
	transfer               trace.Span   // the grant's data arriving
}

// end makes t inactive and reports whether it was active; q.sendMu held.
func (t *remoteTicket) end() bool {
	if !t.active.Load() {
		return false
	}
	release.Bool(&t.active, false)
	t.q.active--
	return true
}

// Request implements handle.Queue: it sends the request at once, but for an iterative
// handle's next round, which the release of its grant carries (remoteQueue.next). h's
// released ticket is reused with its id, and so is the owner's entry.
func (q *remoteQueue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	r := q.r
	t, _ := reuse.(*remoteTicket)
	q.sendMu.Lock()
	if err := r.lost[q.owner].Load(); err != nil {
		q.sendMu.Unlock()
		return nil, *err
	}
	if t == nil || t.id == 0 || t.active.Load() { // h's released ticket was retired on h's goroutine
		r.mu.Lock()
		t = r.newTicket(q, h)
		r.mu.Unlock()
	}
	if p := q.pair.Load(); p != nil && h != p.handle {
		p.freeze()
	} else if p != nil {
		release.Bool(&t.active, true)
		p.mu.Lock() // a wake on the reader's goroutine may look at t, reused (pairWoken)
		t.latch.Start()
		t.rnd = r.j.round(true, h.Acquires())
		p.mu.Unlock()
		q.pairWaiting.Store(t)
		q.sendMu.Unlock()
		q.pairRequest(p, t)
		return t, nil
	}
	release.Bool(&t.active, true)
	q.active++
	t.latch.Start()
	live := r.j.requestsLive.Load()
	t.rnd = r.j.round(t.spec.Iterative, h.Acquires())
	var err error
	if p := q.next; p != nil { // queued: the next message on the connection takes it along
		q.next = nil
		err = r.mesh.SendAhead(q.owner, transport.Requester, p.request(false).header(), nil)
	}
	if err == nil && live && t.spec.Iterative { // made in Acquire, under the last round's grant
		q.next = t
	} else if err == nil {
		err = r.mesh.Send(q.owner, transport.Requester, t.request(!live).header(), nil)
	}
	if err != nil {
		t.end()
		q.sendMu.Unlock()
		return nil, err
	}
	q.sendMu.Unlock()
	return t, nil
}

// request is t's request message; initial: declared in the init phase.
func (t *remoteTicket) request(initial bool) requestMsg {
	return requestMsg{loc: t.q.loc, ticket: t.id, mode: t.spec.Mode, initial: initial, pos: t.spec.Pos, task: t.spec.Task, round: t.rnd}
}

func (t *remoteTicket) Data() []byte {
	if p := t.paired(); p != nil {
		return p.data
	}
	return t.q.mirror
}

// Release gives the grant back to the owner, with the data when it was a write.
func (t *remoteTicket) Release() error {
	if p := t.paired(); p != nil {
		release.Bool(&t.active, false)
		t.q.pairRelease(p, t, false)
		return nil
	}
	return t.q.r.sendRelease(t, releaseMsg{data: t.spec.Mode == fifo.Write}, nil, true)
}

// sendRelease ends t's access at the owner with m (data: the mirror is the new data;
// failed: payload says why); onTask: a task's goroutine, which may write it itself. A
// ticket that is not requested again is retired after the release is on its way, so that
// a request that reuses its id follows it. In a failed job nothing is sent.
func (r *requester) sendRelease(t *remoteTicket, m releaseMsg, payload []byte, onTask bool) error {
	q := t.q
	q.sendMu.Lock()
	if ended := t.end(); !ended || r.j.failed.Load() {
		q.sendMu.Unlock()
		if !ended {
			return fifo.ErrNotGranted
		}
		return nil
	}
	retire := !t.spec.Iterative || m.failed || t.latch.State() == handle.LatchCancelled
	m.loc, m.ticket, m.flow = q.loc, t.id, t.releaseFlow
	if next := q.next; next != nil && next.h == t.h {
		m.next, q.next = next.id, nil // the owner places it first (rule 6)
	}
	if m.data {
		payload = q.mirror
	}
	m.dropped = q.givenBack(t.version, m.data)
	// Queued under sendMu, before any later request of q, and flushed after.
	err := r.mesh.SendAhead(q.owner, transport.Requester, m.header(), payload)
	q.sendMu.Unlock()
	if err == nil {
		err = r.mesh.Flush(q.owner, transport.Requester, onTask)
	}
	if retire {
		r.retire(t)
	}
	return err
}

// granted delivers a grant: its data, if any, is in the mirror already (grantSink). A view
// of an owner that has ended is not delivered: the owner's loss, which the transport
// reports within the peer timeout, fails the job with its cause.
func (r *requester) granted(from int, m grantMsg, payload []byte) error {
	t := r.find(from, m.ticket)
	if t == nil {
		if q := r.pairGone(from, m); q != nil { // it cancelled its request, which its report of it ends at the owner
			if !m.more {
				r.deliverBatch(q, m.recycle)
			}
			return nil
		}
		return fmt.Errorf("grant of unknown ticket %d", m.ticket)
	}
	if m.refused {
		t.latch.Fail(fmt.Errorf("rank %d refused the request: %s", from, payload))
		return nil
	}
	q := t.q
	if m.pair {
		if err := t.pairLanded(); err != nil {
			return err
		}
	} else if err := q.landed(m, payload); errors.Is(err, hugemem.ErrGone) {
		r.j.log.Debug("orwl: a grant's owner has ended", "rank", from, "err", err)
		return nil
	} else if err != nil {
		return err
	}
	r.j.endTransfer(&t.transfer)
	t.version, t.grantFlow = m.version, m.flow
	q.batch = append(q.batch, t)
	if !m.more {
		r.deliverBatch(q, m.recycle)
	}
	return nil
}

// deliverBatch grants the tickets of q's batch together; recycle: the last grant said so.
func (r *requester) deliverBatch(q *remoteQueue, recycle bool) {
	if len(q.batch) == 0 {
		return
	}
	var cancelled []*remoteTicket
	q.sendMu.Lock()
	if held := q.heldOf(q.batch); held > 0 {
		q.hold(held, recycle, q.batch[0].spec.Mode == fifo.Read) // a read group, or a write alone
	}
	for i, b := range q.batch {
		if !b.latch.Grant() && b.paired() == nil { // a pair's reader gives it back with its report of the cancel
			cancelled = append(cancelled, b)
		}
		q.batch[i] = nil
	}
	q.sendMu.Unlock()
	q.batch = q.batch[:0]
	if cancelled != nil {
		r.giveBack(cancelled)
	}
}
