package orwl

import (
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/release"
)

// This file holds a request withdrawn by its handle (handle.Ticket.Cancel), local or
// remote: a grant that had arrived goes back unchanged, one still to come as soon as it
// comes.

// Cancel withdraws the ticket; a grant that had arrived goes back with the data unchanged.
func (t *localTicket) Cancel() {
	if t.loc.pairCancel(t) {
		return
	}
	t.latch.Cancel()
	t.loc.cancel(&t.req)
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
	l.ungranting(r)
	granted := l.fifo.Cancel(r, buf[:0])
	l.granting(granted)
	l.mu.Unlock()
	deliver(granted, true)
}

// giveBack gives back the grants of a batch (requester.granted) whose tickets were
// cancelled before they arrived: the cancellation wins.
func (r *requester) giveBack(cancelled []*remoteTicket) {
	for _, t := range cancelled {
		r.sendRelease(t, releaseMsg{}, nil, false)
	}
}

// Cancel gives a grant that had arrived back now, unchanged, and one that has not as soon
// as it arrives (requester.granted); a failed ticket only ends.
func (t *remoteTicket) Cancel() {
	if p := t.paired(); p != nil {
		t.latch.Cancel()
		release.Bool(&t.active, false)
		t.q.pairRelease(p, t, true)
		return
	}
	r := t.q.r
	if t.latch.Cancel() {
		r.sendRelease(t, releaseMsg{}, nil, true)
		return
	}
	if t.latch.State() == handle.LatchFailed {
		t.q.sendMu.Lock()
		t.end()
		t.q.sendMu.Unlock()
	}
}
