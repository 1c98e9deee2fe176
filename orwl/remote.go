package orwl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// node is this process's end of the protocol (protocol.go): the requester side (remote
// queues and their tickets) and the owner side (requests of other processes on locations of
// this one). It is the mesh's Handler.
type node struct {
	j    *job
	mesh *transport.Mesh
	log  *slog.Logger

	mu         sync.Mutex
	tickets    []*remoteTicket // this process's tickets on other owners, by id (0 unused)
	freeIDs    []uint64        // ids of retired tickets, handed out again
	lost       []error         // by rank, once lost
	problems   []*string       // by rank: init-phase mistakes, at the schedule
	watch      deadlockWatch   // rank 0: the reports of stuck processes; guarded by mu
	traceParts [][]byte        // rank 0: the trace of every process, at the end; guarded by mu
	clock      chan int64      // rank 0's answers to clock questions

	// served holds, by requester rank and ticket id, the requests of other processes on our
	// locations. A rank's table is used only by the reader of that rank's connection, which
	// delivers its requests and releases in order; entries are reused with the ids.
	served [][]*served
}

// maxTicketID bounds the ticket ids a peer may use: ids are dense (retired ids are handed
// out again), so a larger one is a broken peer, not a big job.
const maxTicketID = 1 << 24

func newNode(j *job, log *slog.Logger) *node {
	return &node{
		j:          j,
		log:        log,
		tickets:    []*remoteTicket{nil},
		served:     make([][]*served, j.procs),
		lost:       make([]error, j.procs),
		problems:   make([]*string, j.procs),
		traceParts: make([][]byte, j.procs),
		clock:      make(chan int64, 1),
	}
}

// remoteQueue is the proxy of a location owned by another process. Its mirror holds the
// data the last grant brought; it is reused across iterations. The owner knows which
// version each mirror holds and sends the data only when it is newer.
type remoteQueue struct {
	n       *node
	owner   int
	loc     uint32
	mirror  []byte // 8-byte aligned, never nil; written by a grant's data or under a write grant
	version uint64 // the version the mirror holds (0: none)
}

// remoteTicket is a request of this process on a remote location.
type remoteTicket struct {
	ticketBase
	q       *remoteQueue
	id      uint64 // its number in n.tickets and at the owner; 0 once retired
	active  bool   // requested and not yet released; guarded by n.mu
	version uint64 // the version the grant carried

	grantFlow, releaseFlow trace.FlowID // trace arrows carried by the grant and the release
	transfer               trace.Span   // the grant's data arriving
}

// newTicket registers a new ticket of q under a free id; n.mu held.
func (n *node) newTicket(q *remoteQueue) *remoteTicket {
	t := &remoteTicket{q: q}
	t.self, t.j = t, n.j
	if k := len(n.freeIDs); k > 0 {
		t.id = n.freeIDs[k-1]
		n.freeIDs = n.freeIDs[:k-1]
		n.tickets[t.id] = t
	} else {
		t.id = uint64(len(n.tickets))
		n.tickets = append(n.tickets, t)
	}
	return t
}

// ticket returns the active ticket numbered id, or nil.
func (n *node) ticket(id uint64) *remoteTicket {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id >= uint64(len(n.tickets)) || n.tickets[id] == nil || !n.tickets[id].active {
		return nil
	}
	return n.tickets[id]
}

// Request implements handle.Queue: it sends the request to the owner at once. A released
// ticket of the same handle is reused with its id, so the owner reuses its entry too.
func (q *remoteQueue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	n := q.n
	t, _ := reuse.(*remoteTicket)
	n.mu.Lock()
	if err := n.lost[q.owner]; err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if t == nil || t.id == 0 || t.active {
		t = n.newTicket(q)
	}
	t.h, t.active = h, true
	t.latch.Start()
	n.mu.Unlock()
	spec := h.Spec()
	m := requestMsg{loc: q.loc, ticket: t.id, mode: spec.Mode, initial: !n.j.requestsLive.Load(), pos: spec.Pos, task: spec.Task}
	// Queued, not written at once: it is not awaited yet, and the release that follows
	// takes it along in one write (see transport.Mesh.SendNow).
	if err := n.mesh.Send(q.owner, transport.Requester, m.header(), nil); err != nil {
		n.mu.Lock()
		t.active = false
		n.mu.Unlock()
		return nil, err
	}
	return t, nil
}

func (t *remoteTicket) Latch() *handle.Latch { return &t.latch }
func (t *remoteTicket) Data() []byte         { return t.q.mirror }

func (t *remoteTicket) Resize(n int) ([]byte, error) {
	t.q.mirror = resized(t.q.mirror, n)
	return t.q.mirror, nil
}

// Release gives the grant back to the owner, with the data when it was a write.
func (t *remoteTicket) Release() error {
	return t.q.n.sendRelease(t, releaseMsg{data: t.h.Mode() == fifo.Write}, nil, true)
}

// failGrant gives the grant back as failed: the owner fails the location with err. In a
// failed job it sends nothing: the owner fails with the job.
func (t *remoteTicket) failGrant(err error) {
	t.q.n.sendRelease(t, releaseMsg{failed: true}, []byte(err.Error()), true)
}

// Cancel gives a grant that had arrived back now, unchanged, and one that has not as soon
// as it arrives (see granted).
func (t *remoteTicket) Cancel() {
	n := t.q.n
	if t.latch.Cancel() {
		n.sendRelease(t, releaseMsg{}, nil, true)
		return
	}
	if t.latch.State() == handle.LatchFailed {
		n.mu.Lock()
		t.active = false
		n.mu.Unlock()
	}
}

// sendRelease ends t's access at the owner with m (data: the mirror goes back as the new
// data; failed: payload says why); onTask: on a task's goroutine, which writes a small
// release itself. A ticket that will not be requested again (a one-shot
// handle's, a cancelled or failed one's) is retired and its id handed out again, after the
// release is on its way: a later request with the same id reaches the owner after it. In a
// failed job nothing is sent: the owner fails with the job, and hands nothing on.
func (n *node) sendRelease(t *remoteTicket, m releaseMsg, payload []byte, onTask bool) error {
	n.mu.Lock()
	if !t.active {
		n.mu.Unlock()
		return fifo.ErrNotGranted
	}
	t.active = false
	if n.j.failed.Load() {
		n.mu.Unlock()
		return nil
	}
	retire := !t.h.Spec().Iterative || m.failed || t.latch.State() == handle.LatchCancelled
	n.mu.Unlock()
	m.loc, m.ticket, m.flow = t.q.loc, t.id, t.releaseFlow
	if m.data {
		payload = t.q.mirror
		t.q.version = t.version + 1 // what the owner's data becomes
	}
	err := n.send(onTask, t.q.owner, transport.Requester, m.header(), payload)
	if retire {
		n.mu.Lock()
		n.tickets[t.id] = nil
		n.freeIDs = append(n.freeIDs, t.id)
		t.id = 0
		n.mu.Unlock()
	}
	return err
}

func (t *remoteTicket) where() uint32 { return t.q.loc }

func (t *remoteTicket) describeWait(w *waitRecord) bool {
	w.Loc, w.Ticket = int(t.q.loc), t.id
	return !t.latch.Granted()
}

func (t *remoteTicket) traceGrant(int, trace.Mode) trace.FlowID { return t.grantFlow }

func (t *remoteTicket) traceRelease(_ int, _ trace.Mode, flow trace.FlowID) { t.releaseFlow = flow }

// served is a request of a remote handle, placed in a FIFO of this process on its behalf.
type served struct {
	req       fifo.Request
	n         *node
	from      int    // requester rank
	id        uint64 // the requester's ticket id
	taskID    int    // the requesting task
	loc       *location
	active    bool        // requested and not yet released; the reader of from's connection only
	delivered atomic.Bool // the grant was sent
	transfer  trace.Span  // a write-back arriving
}

// granted sends the grant to the requester, with the data when its mirror does not hold
// this version: under the location's sendMu, so that the first grant of a version that a
// process receives is the one that carries it.
func (s *served) granted(onTask bool) {
	l := s.loc
	l.fq.Grant(s.taskID, traceMode(s.req.Mode()))
	l.sendMu.Lock()
	m := grantMsg{loc: l.index, ticket: s.id, version: l.version, flow: trace.FlowID(l.lastFlow.Load())}
	var payload []byte
	if l.mirrors[s.from] != l.version {
		m.data, payload = true, l.data
		l.mirrors[s.from] = l.version
	}
	s.delivered.Store(true)
	err := s.n.send(onTask, s.from, transport.Owner, m.header(), payload)
	l.sendMu.Unlock()
	if err != nil && !errors.Is(err, transport.ErrPeerClosed) {
		// A peer that closed its mesh cleanly has finished (every task of the job is done) or
		// has failed and said so: nobody waits for this grant.
		s.n.j.fail(fmt.Errorf("orwl: sending the grant of %s to rank %d: %w", l.id, s.from, err))
	}
}

// failed does nothing: the requester learns of the job's failure itself.
func (s *served) failed(error)                {}
func (s *served) task() int                   { return s.taskID }
func (s *served) remote() (int, uint64, bool) { return s.from, s.id, true }

// servedAt returns the entry of from's ticket id, making it on first use.
func (n *node) servedAt(from int, id uint64) (*served, error) {
	if id == 0 || id > maxTicketID {
		return nil, fmt.Errorf("orwl: rank %d sent ticket id %d, outside 1..%d", from, id, maxTicketID)
	}
	table := n.served[from]
	for uint64(len(table)) <= id {
		table = append(table, nil)
	}
	n.served[from] = table
	if table[id] == nil {
		s := &served{n: n, from: from, id: id}
		s.req.Tag = s
		table[id] = s
	}
	return table[id], nil
}

// Sink implements transport.Handler: grants land in the mirror, write-backs in the location.
// Data for a ticket that holds no grant to receive it is refused: the peer is broken.
func (n *node) Sink(from int, h *transport.Header) ([]byte, error) {
	if h.Flags&flagData == 0 {
		return nil, nil
	}
	switch h.Type {
	case msgGrant:
		t := n.ticket(h.ID)
		if t == nil || t.q.owner != from {
			return nil, fmt.Errorf("orwl: data for unknown ticket %d", h.ID)
		}
		if n.j.rec != nil {
			t.transfer = n.j.rec.TaskTrack(t.h.Spec().Task).BeginTransfer(trace.Loc(n.j.locationAt(h.Key)), trace.In, from, int64(h.Len))
		}
		return resizeKeep(&t.q.mirror, int(h.Len)), nil
	case msgRelease:
		s := n.servedGrant(from, h.ID)
		if s == nil || s.req.Mode() != fifo.Write {
			return nil, fmt.Errorf("orwl: write-back for ticket %d, which holds no write grant", h.ID)
		}
		if n.j.rec != nil {
			s.transfer = n.j.rec.TaskTrack(s.loc.id.Task).BeginTransfer(trace.Loc(s.loc.id), trace.In, from, int64(h.Len))
		}
		return resizeKeep(&s.loc.data, int(h.Len)), nil
	}
	return nil, nil
}

// servedGrant returns from's entry for ticket id when it holds a grant, else nil.
func (n *node) servedGrant(from int, id uint64) *served {
	if id >= uint64(len(n.served[from])) {
		return nil
	}
	s := n.served[from][id]
	if s == nil || !s.active || !s.delivered.Load() {
		return nil
	}
	return s
}

// send sends a message, written at once by the caller when it is a task (see location).
func (n *node) send(onTask bool, to int, role transport.Role, h transport.Header, payload []byte) error {
	if onTask {
		return n.mesh.SendNow(to, role, h, payload)
	}
	return n.mesh.Send(to, role, h, payload)
}

// resizeKeep sets *b to n bytes, reallocating (8-byte aligned, freeing the old buffer) only
// when it must grow.
func resizeKeep(b *[]byte, n int) []byte {
	if n > cap(*b) {
		freeBytes(*b)
		*b = alignedBytes(n)
	}
	*b = (*b)[:n]
	return *b
}

// Handle implements transport.Handler.
func (n *node) Handle(from int, h *transport.Header, payload []byte) {
	var err error
	switch h.Type {
	case msgRequest:
		err = n.serve(from, h)
	case msgGrant:
		err = n.granted(from, h, payload)
	case msgRelease:
		err = n.released(from, h, payload)
	case msgProblems:
		text := string(payload)
		n.mu.Lock()
		n.problems[from] = &text
		n.mu.Unlock()
	case msgFail:
		m := decodeFailure(h)
		msg := string(payload)
		if note := n.mesh.PauseNote(); note != "" {
			msg += " " + note
		}
		n.j.fail(&peerFailure{rank: from, msg: msg, deadlock: m.deadlock, peerLost: m.peerLost})
	case msgStuck:
		n.stuck(from, decodeStuck(h), payload)
	case msgClock:
		n.clockMessage(from, decodeClock(h))
	case msgTracePart:
		n.mu.Lock()
		n.traceParts[from] = bytes.Clone(payload) // payload is the mesh's scratch memory
		n.mu.Unlock()
	default:
		err = fmt.Errorf("unknown message type %d", h.Type)
	}
	if err != nil {
		n.j.fail(fmt.Errorf("orwl: protocol error from rank %d: %w", from, err))
	}
}

// serve places the request of a remote handle in the FIFO of one of our locations, or
// refuses it when the location does not exist here.
func (n *node) serve(from int, h *transport.Header) error {
	m := decodeRequest(h)
	n.j.det.moves.Add(1) // the deadlock watch must see that something moved
	l, err := n.j.ownedByIndex(m.loc)
	if err != nil {
		n.log.Error("orwl: request refused", "rank", from, "err", err)
		g := grantMsg{loc: m.loc, ticket: m.ticket, refused: true}
		n.mesh.Send(from, transport.Owner, g.header(), []byte(err.Error()))
		return nil
	}
	s, err := n.servedAt(from, m.ticket)
	if err != nil {
		return err
	}
	if s.active {
		return fmt.Errorf("ticket %d requested again before its release", m.ticket)
	}
	s.active, s.taskID, s.loc = true, m.task, l
	s.delivered.Store(false)
	l.enqueue(&s.req, m.mode, m.initial, m.pos, m.task, false) // fails only in a failed job, which the requester learns
	return nil
}

// granted completes a remote ticket: the payload, if any, is already in the mirror.
func (n *node) granted(from int, h *transport.Header, payload []byte) error {
	m := decodeGrant(h)
	n.j.det.moves.Add(1)
	t := n.ticket(m.ticket)
	if t == nil || t.q.owner != from {
		return fmt.Errorf("grant of unknown ticket %d", m.ticket)
	}
	if m.refused {
		t.latch.Fail(fmt.Errorf("rank %d refused the request: %s", from, payload))
		return nil
	}
	q := t.q
	if m.data {
		resizeKeep(&q.mirror, int(h.Len)) // the payload is there; this sets the size, 0 included
		q.version = m.version
	} else if q.version != m.version {
		return fmt.Errorf("grant of %s without data: this process's copy holds version %d, not %d", n.j.locationAt(m.loc), q.version, m.version)
	}
	t.transfer.End()
	t.transfer = trace.Span{}
	t.version, t.grantFlow = m.version, m.flow
	if !t.latch.Grant() {
		n.sendRelease(t, releaseMsg{}, nil, false) // cancelled meanwhile: the cancellation wins, give it back
	}
	return nil
}

// released ends a remote handle's access to one of our locations; a write's data is already
// in the location's buffer.
func (n *node) released(from int, h *transport.Header, payload []byte) error {
	m := decodeRelease(h)
	n.j.det.moves.Add(1)
	s := n.servedGrant(from, m.ticket)
	if s == nil {
		return fmt.Errorf("release of ticket %d, which holds no grant", m.ticket)
	}
	s.active = false
	s.transfer.End()
	s.transfer = trace.Span{}
	l := s.loc
	if m.failed {
		l.fail(fmt.Errorf("rank %d: %s", from, payload))
		return nil
	}
	l.lastFlow.Store(uint64(m.flow))
	l.fq.Release(s.taskID, traceMode(s.req.Mode()))
	mirror := -1
	if m.data && s.req.Mode() == fifo.Write {
		mirror = from
		resizeKeep(&l.data, int(h.Len)) // the payload is there; this sets the size, 0 included
	}
	return l.release(&s.req, mirror >= 0, mirror, false)
}

// PeerLost implements transport.Handler: a process of the job is gone before it finished,
// so the job fails: every request fails, and the others that can be reached are told.
func (n *node) PeerLost(rank int, err error) {
	lostErr := fmt.Errorf("orwl: process rank %d lost: %w", rank, err)
	n.mu.Lock()
	n.lost[rank] = lostErr
	n.mu.Unlock()
	n.j.fail(lostErr)
}

// failTickets fails every ticket of this process that still waits for its grant.
func (n *node) failTickets(err error) {
	n.mu.Lock()
	tickets := append([]*remoteTicket(nil), n.tickets...)
	n.mu.Unlock()
	for _, t := range tickets {
		if t != nil {
			t.latch.Fail(err)
		}
	}
}

// exchangeProblems tells every process this one's init-phase mistakes and returns everybody's,
// in rank order.
func (n *node) exchangeProblems(ctx context.Context, mine []error) ([]string, error) {
	var text string
	if err := errors.Join(mine...); err != nil {
		text = err.Error() // one line per mistake
	}
	payload := []byte(text)
	for r := range n.j.procs {
		if r != n.j.rank {
			if err := n.mesh.Send(r, transport.Requester, transport.Header{Type: msgProblems}, payload); err != nil {
				return nil, err
			}
		}
	}
	if err := n.mesh.Barrier(ctx); err != nil {
		return nil, err
	}
	var all []string
	n.mu.Lock()
	defer n.mu.Unlock()
	for r := range n.j.procs {
		p := n.problems[r]
		if r == n.j.rank {
			p = &text
		}
		if p == nil {
			return nil, fmt.Errorf("orwl: schedule: rank %d sent no report", r)
		}
		if *p != "" {
			all = append(all, *p)
		}
	}
	return all, nil
}

// peerFailure is the failure of another process of the job, as it reported it.
type peerFailure struct {
	rank               int
	msg                string
	deadlock, peerLost bool
}

func (e *peerFailure) Error() string { return fmt.Sprintf("orwl: rank %d failed: %s", e.rank, e.msg) }

// Is makes a deadlock or a lost process that another process found match ErrDeadlock or
// ErrPeerLost here too.
func (e *peerFailure) Is(target error) bool {
	return e.deadlock && target == ErrDeadlock || e.peerLost && target == ErrPeerLost
}

// broadcastFailure tells the other processes that can still be reached, except rank except,
// that this job failed.
func (n *node) broadcastFailure(err error, except int) {
	m := failMsg{deadlock: errors.Is(err, ErrDeadlock), peerLost: errors.Is(err, ErrPeerLost)}
	for r := range n.j.procs {
		if r != n.j.rank && r != except {
			n.mesh.Send(r, transport.Requester, m.header(), []byte(err.Error()))
		}
	}
}
