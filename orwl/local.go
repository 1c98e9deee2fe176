package orwl

import (
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// This file holds the local queue: a location of this process as its own handles see it
// (location.Request) and their tickets (localTicket). It is apart from location.go, whose
// FIFO operations a grant to another process reads too.

// localTicket is a request on a location of this process.
type localTicket struct {
	ticketBase
	req fifo.Request
	loc *location
}

func (t *localTicket) Data() []byte { return t.loc.data }

// Release ends the access; a write makes a new version of the data.
func (t *localTicket) Release() error {
	if t.loc.pairRelease(t) {
		return nil
	}
	write := t.spec.Mode == fifo.Write
	if write {
		t.loc.j.bufs.freeStale(&t.loc.stale)
	}
	return t.loc.release(&t.req, write, -1, true, nil)
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
	rnd := l.j.round(spec.Iterative, h.Acquires())
	if l.pairRequest(t, rnd) {
		return t, nil
	}
	t.rnd = rnd
	t.latch.Start()
	if err := l.enqueue(&t.req, spec.Mode, true, spec.Pos, spec.Task, true); err != nil {
		return nil, err
	}
	return t, nil
}
