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

// The ORWL protocol between processes, on top of the transport mesh. Requests, releases and
// write-back data travel on the requester's connection; grants with the data travel on the
// owner's, unmasked (see transport.Role).
const (
	// msgRequest, requester to owner: Loc, Handle = ticket id, Flags = flagWrite|flagInitial,
	// Arg = position<<32 | task, Version = the version the requester's mirror holds.
	msgRequest = transport.TypeUser + iota
	// msgGrant, owner to requester: Handle = ticket id, Version = the data's version, Arg =
	// the trace flow of the release that caused it; with flagData the payload is the data,
	// without it the mirror already holds that version. With flagError the payload is the
	// text of why the request was refused.
	msgGrant
	// msgRelease, requester to owner: Handle = ticket id, Arg = the release's trace flow;
	// with flagData the payload is the data a writer leaves.
	msgRelease
	// msgProblems: the sender's init-phase mistakes as text (empty when none), at the schedule.
	msgProblems
	// msgFail: the sender's job failed; the payload is the error's text.
	msgFail
)

const (
	flagWrite    = 1
	flagInitial  = 2
	flagData     = 4
	flagError    = 8
	flagDeadlock = 16 // on msgFail: the failure is a deadlock
)

// ticketFailed is the state of a remote ticket whose owner is gone or refused it.
const ticketFailed = fifo.State(100)

// node is this process's end of the protocol: the requester side (remote queues and their
// tickets) and the owner side (requests of other processes on locations of this one). It is
// the mesh's Handler.
type node struct {
	j    *job
	mesh *transport.Mesh
	log  *slog.Logger

	mu         sync.Mutex
	nextID     uint64
	tickets    map[uint64]*remoteTicket // this process's requests on other owners
	served     []map[uint64]*served     // by requester rank: their requests on our locations
	lost       []error                  // by rank, once lost
	problems   []*string                // by rank: init-phase mistakes, at the schedule
	watch      deadlockWatch            // rank 0: the reports of stuck processes; guarded by mu
	traceParts [][]byte                 // rank 0: the trace of every process, at the end; guarded by mu
	clock      chan int64               // rank 0's answers to clock questions
	connected  chan struct{}            // closed when mesh is set
	finishing  atomic.Bool              // this process's tasks are done: peers may leave cleanly now
}

func newNode(j *job, log *slog.Logger) *node {
	return &node{
		j:          j,
		log:        log,
		tickets:    map[uint64]*remoteTicket{},
		served:     make([]map[uint64]*served, j.procs),
		lost:       make([]error, j.procs),
		problems:   make([]*string, j.procs),
		traceParts: make([][]byte, j.procs),
		clock:      make(chan int64, 1),
		connected:  make(chan struct{}),
	}
}

// remoteQueue is the proxy of a location owned by another process. Its mirror holds the last
// data a grant brought; it is reused across iterations.
type remoteQueue struct {
	n       *node
	owner   int
	loc     uint32
	mirror  []byte // 8-byte aligned; written only while no ticket of this process holds it
	version uint64 // the version the mirror holds (0: none); guarded by n.mu
}

// remoteTicket is a request of this process on a remote location.
type remoteTicket struct {
	q            *remoteQueue
	id           uint64
	mode         fifo.Mode
	state        atomic.Uint32
	waiting      bool          // guarded by n.mu
	ready        chan struct{} // the grant's (or failure's) token when waiting
	grantVersion uint64        // guarded by n.mu
	err          error         // why it failed; guarded by n.mu
	task         int           // the task of the handle that made it, for the trace

	grantFlow, releaseFlow trace.FlowID // trace arrows carried by the grant and the release
	transfer               trace.Span   // the grant's data arriving
}

// Request implements handle.Queue: it sends the request to the owner at once.
func (q *remoteQueue) Request(h *handle.Handle, reuse handle.Ticket) (handle.Ticket, error) {
	n := q.n
	t, _ := reuse.(*remoteTicket)
	if t == nil || fifo.State(t.state.Load()) != fifo.Idle {
		t = &remoteTicket{q: q, ready: make(chan struct{}, 1)}
	}
	spec := h.Spec()
	n.mu.Lock()
	if err := n.lost[q.owner]; err != nil {
		n.mu.Unlock()
		return nil, err
	}
	n.nextID++
	t.id, t.mode, t.task = n.nextID, spec.Mode, spec.Task
	t.state.Store(uint32(fifo.Queued))
	n.tickets[t.id] = t
	version := q.version
	n.mu.Unlock()
	hdr := transport.Header{Type: msgRequest, Loc: q.loc, Handle: t.id, Version: version,
		Arg: int64(spec.Pos)<<32 | int64(spec.Task)}
	if spec.Mode == fifo.Write {
		hdr.Flags |= flagWrite
	}
	if !n.j.requestsLive.Load() {
		hdr.Flags |= flagInitial
	}
	if err := n.mesh.Send(q.owner, transport.Requester, hdr, nil); err != nil {
		n.mu.Lock()
		delete(n.tickets, t.id)
		t.state.Store(uint32(fifo.Idle))
		n.mu.Unlock()
		return nil, err
	}
	return t, nil
}

func (t *remoteTicket) Granted() bool { return fifo.State(t.state.Load()) == fifo.Granted }

func (t *remoteTicket) Data() []byte { return t.q.mirror }

func (t *remoteTicket) Resize(n int) ([]byte, error) {
	t.q.mirror = resized(t.q.mirror, n)
	return t.q.mirror, nil
}

// Wait blocks until the grant arrives, the owner is lost, or ctx is done.
func (t *remoteTicket) Wait(ctx context.Context) error {
	n := t.q.n
	n.mu.Lock()
	switch fifo.State(t.state.Load()) {
	case fifo.Granted:
		n.mu.Unlock()
		return nil
	case ticketFailed:
		err := t.err
		n.mu.Unlock()
		return err
	case fifo.Queued:
	default:
		n.mu.Unlock()
		return fifo.ErrNotQueued
	}
	t.waiting = true
	n.mu.Unlock()
	select {
	case <-t.ready:
		n.mu.Lock()
		defer n.mu.Unlock()
		if fifo.State(t.state.Load()) == ticketFailed {
			return t.err
		}
		return nil
	case <-ctx.Done():
	}
	n.mu.Lock()
	if !t.waiting {
		<-t.ready // granted or failed meanwhile: the cancellation wins
	}
	t.waiting = false
	n.mu.Unlock()
	t.Cancel()
	return ctx.Err()
}

// Release gives the grant back to the owner, with the data when it was a write.
func (t *remoteTicket) Release() error {
	n := t.q.n
	n.mu.Lock()
	if fifo.State(t.state.Load()) != fifo.Granted {
		n.mu.Unlock()
		return fifo.ErrNotGranted
	}
	hdr := transport.Header{Type: msgRelease, Loc: t.q.loc, Handle: t.id, Arg: int64(t.releaseFlow)}
	var payload []byte
	if t.mode == fifo.Write {
		hdr.Flags = flagData
		payload = t.q.mirror
		t.q.version = t.grantVersion + 1 // what the owner's data becomes
	}
	delete(n.tickets, t.id)
	t.state.Store(uint32(fifo.Idle))
	n.mu.Unlock()
	return n.mesh.Send(t.q.owner, transport.Requester, hdr, payload)
}

// Cancel releases a granted ticket now and a queued one as soon as its grant arrives.
func (t *remoteTicket) Cancel() {
	n := t.q.n
	n.mu.Lock()
	switch fifo.State(t.state.Load()) {
	case fifo.Granted:
		t.mode = fifo.Read // the data was not written: give it back unchanged
		n.mu.Unlock()
		t.Release()
		return
	case fifo.Queued:
		t.state.Store(uint32(fifo.Cancelled))
	case ticketFailed:
		delete(n.tickets, t.id)
		t.state.Store(uint32(fifo.Idle))
	}
	n.mu.Unlock()
}

// served is a request of a remote handle, placed in a FIFO of this process on its behalf.
type served struct {
	fifo.Request
	n           *node
	from        int // requester rank
	ticket      uint64
	task, pos   int
	loc         *location
	sentVersion uint64     // what the requester's mirror held when it asked
	transfer    trace.Span // a write-back arriving
}

// onGrant pushes the data to the requester; it runs with the FIFO's lock held.
func (s *served) onGrant(*fifo.Request) {
	data, version := s.loc.data, s.loc.version
	hdr := transport.Header{Type: msgGrant, Loc: s.loc.index, Handle: s.ticket, Version: version,
		Arg: int64(s.loc.lastFlow.Load())}
	s.loc.fq.Grant(s.task, traceMode(s.Mode()))
	var payload []byte
	if version != s.sentVersion {
		hdr.Flags = flagData
		payload = data
	}
	if err := s.n.mesh.Send(s.from, transport.Owner, hdr, payload); err != nil {
		s.n.log.Debug("orwl: grant not sent", "rank", s.from, "err", err)
	}
}

// Sink implements transport.Handler: grants land in the mirror, write-backs in the location.
func (n *node) Sink(from int, h *transport.Header) []byte {
	if h.Flags&flagData == 0 {
		return nil
	}
	switch h.Type {
	case msgGrant:
		n.mu.Lock()
		t := n.tickets[h.Handle]
		current := t != nil && t.q.version == h.Version
		n.mu.Unlock()
		if t == nil || current {
			// Unknown, or the mirror already holds this version: another task of this
			// process may be reading it in the same read group, so it must not be rewritten.
			return nil
		}
		if n.j.rec != nil {
			t.transfer = n.j.rec.TaskTrack(t.task).BeginTransfer(trace.Loc(n.j.locationAt(h.Loc)), trace.In, from, int64(h.Len))
		}
		return resizeKeep(&t.q.mirror, int(h.Len))
	case msgRelease:
		n.mu.Lock()
		s := n.served[from][h.Handle]
		n.mu.Unlock()
		if s == nil || s.State() != fifo.Granted || s.Mode() != fifo.Write {
			return nil
		}
		if n.j.rec != nil {
			s.transfer = n.j.rec.TaskTrack(s.loc.id.Task).BeginTransfer(trace.Loc(s.loc.id), trace.In, from, int64(h.Len))
		}
		return resizeKeep(&s.loc.data, int(h.Len))
	}
	return nil
}

// resizeKeep sets *b to n bytes, reallocating (8-byte aligned) only when it must grow.
func resizeKeep(b *[]byte, n int) []byte {
	if n > cap(*b) {
		*b = alignedBytes(n)
	}
	*b = (*b)[:n]
	return *b
}

// Handle implements transport.Handler.
func (n *node) Handle(from int, h *transport.Header, payload []byte) {
	switch h.Type {
	case msgRequest:
		n.serve(from, h)
	case msgGrant:
		n.granted(from, h, payload)
	case msgRelease:
		n.released(from, h)
	case msgProblems:
		text := string(payload)
		n.mu.Lock()
		n.problems[from] = &text
		n.mu.Unlock()
	case msgFail:
		n.j.fail(&peerFailure{rank: from, msg: string(payload), deadlock: h.Flags&flagDeadlock != 0})
	case msgStuck:
		n.stuck(from, h, payload)
	case msgClock:
		n.clockMessage(from, h)
	case msgTracePart:
		n.mu.Lock()
		n.traceParts[from] = bytes.Clone(payload) // payload is the mesh's scratch memory
		n.mu.Unlock()
	default:
		n.log.Error("orwl: unknown message", "rank", from, "type", h.Type)
	}
}

// serve places the request of a remote handle in the FIFO of one of our locations.
func (n *node) serve(from int, h *transport.Header) {
	n.j.det.moves.Add(1) // the deadlock watch must see that something moved
	l, err := n.j.ownedByIndex(h.Loc)
	if err != nil {
		n.log.Error("orwl: request refused", "rank", from, "err", err)
		msg := []byte(err.Error())
		n.mesh.Send(from, transport.Owner, transport.Header{Type: msgGrant, Loc: h.Loc, Handle: h.Handle, Flags: flagError}, msg)
		return
	}
	mode := fifo.Read
	if h.Flags&flagWrite != 0 {
		mode = fifo.Write
	}
	s := &served{n: n, from: from, ticket: h.Handle, task: int(h.Arg & 0xffffffff), pos: int(h.Arg >> 32),
		loc: l, sentVersion: h.Version}
	s.Tag = s
	n.mu.Lock()
	if n.served[from] == nil {
		n.served[from] = map[uint64]*served{}
	}
	n.served[from][h.Handle] = s
	n.mu.Unlock()
	if err := l.enqueue(&s.Request, mode, h.Flags&flagInitial != 0, s.pos, s.task, s.onGrant); err != nil {
		n.log.Error("orwl: request not placed", "rank", from, "location", l.id, "err", err)
	}
}

// granted completes a remote ticket: the payload, if any, is already in the mirror.
func (n *node) granted(from int, h *transport.Header, payload []byte) {
	n.j.det.moves.Add(1)
	n.mu.Lock()
	t := n.tickets[h.Handle]
	if t == nil {
		n.mu.Unlock()
		n.log.Error("orwl: grant for an unknown request", "rank", from, "handle", h.Handle)
		return
	}
	if h.Flags&flagError != 0 {
		t.err = fmt.Errorf("rank %d refused the request: %s", from, payload)
		n.fail(t)
		n.mu.Unlock()
		return
	}
	if h.Flags&flagData != 0 {
		t.q.version = h.Version
	}
	t.transfer.End()
	t.transfer = trace.Span{}
	t.grantVersion, t.grantFlow = h.Version, trace.FlowID(h.Arg)
	if fifo.State(t.state.Load()) == fifo.Cancelled {
		t.state.Store(uint32(fifo.Granted))
		t.mode = fifo.Read // nothing was written: give it back unchanged
		n.mu.Unlock()
		t.Release()
		return
	}
	t.state.Store(uint32(fifo.Granted))
	t.wake()
	n.mu.Unlock()
}

// wake hands the grant's (or failure's) token to t's waiter, if it waits; n.mu held.
func (t *remoteTicket) wake() {
	if t.waiting {
		t.waiting = false
		t.ready <- struct{}{}
	}
}

// fail marks t failed and wakes its waiter; n.mu held.
func (n *node) fail(t *remoteTicket) {
	if fifo.State(t.state.Load()) == fifo.Cancelled {
		delete(n.tickets, t.id)
		t.state.Store(uint32(fifo.Idle))
		return
	}
	t.state.Store(uint32(ticketFailed))
	t.wake()
}

// released ends a remote handle's access to one of our locations; a write's data is already
// in the location's buffer.
func (n *node) released(from int, h *transport.Header) {
	n.j.det.moves.Add(1)
	n.mu.Lock()
	s := n.served[from][h.Handle]
	delete(n.served[from], h.Handle)
	n.mu.Unlock()
	if s == nil {
		n.log.Error("orwl: release of an unknown request", "rank", from, "handle", h.Handle)
		return
	}
	if h.Flags&flagData != 0 && s.Mode() == fifo.Write {
		s.loc.version++
	}
	s.transfer.End()
	s.loc.lastFlow.Store(uint64(h.Arg))
	s.loc.fq.Release(s.task, traceMode(s.Mode()))
	if err := s.Release(); err != nil {
		n.log.Error("orwl: remote release", "rank", from, "location", s.loc.id, "err", err)
	}
}

// FrameError implements transport.Handler: the frame was dropped, the job goes on.
func (n *node) FrameError(from int, err error) {
	n.log.Error("orwl: frame rejected", "rank", from, "err", err)
}

// PeerLost implements transport.Handler: every request that depends on rank fails, its
// requests on our locations are withdrawn, and the job fails with the error.
func (n *node) PeerLost(rank int, err error) {
	if n.finishing.Load() && errors.Is(err, transport.ErrPeerClosed) {
		return // the peer passed the final barrier: the job is over
	}
	lostErr := fmt.Errorf("orwl: process rank %d lost: %w", rank, err)
	n.mu.Lock()
	n.lost[rank] = lostErr
	for _, t := range n.tickets {
		if t.q.owner == rank {
			t.err = lostErr
			n.fail(t)
		}
	}
	withdrawn := n.served[rank]
	n.served[rank] = nil
	n.mu.Unlock()
	for _, s := range withdrawn {
		s.Cancel()
	}
	n.j.fail(lostErr)
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
	rank     int
	msg      string
	deadlock bool
}

func (e *peerFailure) Error() string { return fmt.Sprintf("orwl: rank %d failed: %s", e.rank, e.msg) }

// Is makes a deadlock found by another process match ErrDeadlock here too.
func (e *peerFailure) Is(target error) bool { return e.deadlock && target == ErrDeadlock }

// broadcastFailure tells the other processes that this job failed.
func (n *node) broadcastFailure(err error) {
	hdr := transport.Header{Type: msgFail}
	if errors.Is(err, ErrDeadlock) {
		hdr.Flags = flagDeadlock
	}
	for r := range n.j.procs {
		if r != n.j.rank {
			n.mesh.Send(r, transport.Requester, hdr, []byte(err.Error()))
		}
	}
}
