package orwl

import (
	"fmt"
	"sync/atomic"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/internal/release"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// served is a request of a remote handle, placed in a FIFO of this process on its behalf.
type served struct {
	req       fifo.Request
	o         *owner
	from      int    // requester rank
	id        uint64 // the requester's ticket id
	taskID    int    // the requesting task
	pos       int    // its FIFO position
	rnd       int    // see queued.round
	loc       *location
	active    bool          // requested and not yet released; the reader of from's connection only
	recycle   bool          // the grant may say recycle (mirror.go); set under loc.mu
	placed    uint32        // how many times it was placed; the reader of from's connection only
	delivered atomic.Uint32 // how many of its grants were sent: the last placement's, when placed; changed under loc.sendMu
	transfer  trace.Span    // a write-back arriving
}

// owner is this process's side of the requests of other processes on its locations: it
// receives their requests and releases and sends their grants (on the Owner connections).
// served holds them by requester rank and ticket id, reused with the ids; a rank's table is
// used only by the reader of that rank's connection, which delivers them in order.
type owner struct {
	j      *job
	mesh   *transport.Mesh
	served [][]*served
}

// granted sends the grant, with the data when the requester's mirror does not hold this
// version, or, for a read by a process of this host, the name of the data, which it reads
// in place (mirror.go). It is queued under the location's sendMu, so that the first grant
// of a version that a process receives carries it, and flushed after (onTask: by this
// goroutine).
func (s *served) granted(onTask, more bool) {
	l := s.loc
	mode := s.req.Mode()
	flow := l.traceGrant(s.taskID, mode)
	l.sendMu.Lock()
	m := grantMsg{loc: l.index, ticket: s.id, version: l.version, flow: flow, more: more, recycle: s.recycle && !more}
	var payload []byte
	if l.mirrors[s.from] != l.version {
		if share, ok := s.o.viewable(s.from, l, mode); ok {
			m.view, payload = true, share.Append(nil)
			l.mirrors[s.from] = 0 // the requester keeps no copy
		} else {
			m.data, payload = true, l.data
			l.mirrors[s.from] = l.version
		}
	}
	release.Uint32(&s.delivered, s.delivered.Load()+1) // under l.sendMu
	err := s.o.mesh.SendAhead(s.from, transport.Owner, m.header(), payload)
	l.sendMu.Unlock()
	if err == nil {
		err = s.o.mesh.Flush(s.from, transport.Owner, onTask)
	}
	if err != nil && !peerClosed(err) { // closed: nobody waits for it
		s.o.j.fail(fmt.Errorf("orwl: sending the grant of %s to rank %d: %w", l.id, s.from, err))
	}
}

// viewable returns the name of l's data when rank from, which is granted it in mode, reads
// it in place: a read, of data in a shared buffer (buffers.share), by a process of this
// host. l.sendMu held.
func (o *owner) viewable(from int, l *location, mode fifo.Mode) (hugemem.Share, bool) {
	if mode != fifo.Read || len(l.data) < hugemem.Threshold || !o.mesh.SharedMemory(from, transport.Owner) {
		return hugemem.Share{}, false
	}
	return hugemem.SharedAt(l.data)
}

// place places request m of rank from in the FIFO of one of our locations, or refuses it
// when the location does not exist here.
func (o *owner) place(from int, m requestMsg) error {
	l, s, err := o.entry(from, m)
	if s != nil {
		l.enqueue(&s.req, m.mode, m.initial, m.pos, m.task, false) // fails only in a failed job, which the requester learns
	}
	return err
}

// entry returns the location of request m of rank from and its entry, ready to be placed;
// a nil entry when m is refused (the location does not exist here) or wrong (the error).
func (o *owner) entry(from int, m requestMsg) (*location, *served, error) {
	l, err := o.j.ownedByIndex(m.loc)
	if err != nil {
		o.refuse(from, m, err)
		return nil, nil, nil
	}
	s, err := o.serve(from, l, m)
	return l, s, err
}

// serve returns the entry of request m of rank from on l, ready to be placed, or why m is
// wrong.
func (o *owner) serve(from int, l *location, m requestMsg) (*served, error) {
	s, err := o.servedAt(from, m.ticket)
	if err != nil {
		return nil, err
	}
	if s.active {
		return nil, fmt.Errorf("ticket %d requested again before its release", m.ticket)
	}
	s.active, s.taskID, s.pos, s.rnd, s.loc = true, m.task, m.pos, m.round, l
	s.placed++
	return s, nil
}

// released ends a remote handle's access, after placing the request of its next round that
// the release carries, in the same FIFO operation; a write's data is in the location
// already (writeBackSink).
func (o *owner) released(from int, m releaseMsg, payload []byte) error {
	s := o.servedGrant(from, m.ticket)
	if s == nil {
		return fmt.Errorf("release of ticket %d, which holds no grant", m.ticket)
	}
	l, mode := s.loc, s.req.Mode()
	var next *served
	if m.next != 0 {
		if s.rnd < 0 {
			return fmt.Errorf("release of ticket %d with the request of a next round, and it has no rounds", m.ticket)
		}
		var err error
		if next, err = o.serve(from, l, requestMsg{loc: l.index, ticket: m.next, pos: s.pos, task: s.taskID, round: s.rnd + 1}); err != nil {
			return err
		}
	}
	s.active = false
	o.j.endTransfer(&s.transfer)
	if m.failed {
		if next != nil {
			l.enqueue(&next.req, mode, false, next.pos, next.taskID, false)
		}
		l.fail(fmt.Errorf("rank %d: %s", from, payload))
		return nil
	}
	if m.dropped { // before the release grants anything
		l.setMirror(from, 0)
	}
	if next != nil {
		l.fq.Request(next.taskID, mode, next.pos)
	}
	l.traceRelease(s.taskID, mode, m.flow)
	write := m.data && mode == fifo.Write
	if write {
		o.j.bufs.resizeKeep(&l.data, m.size, l.filledAlloc()) // sets the size, 0 included
	}
	return l.release(&s.req, write, from, false, next)
}
