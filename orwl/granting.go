package orwl

import "github.com/orwl-go/orwl/fifo"

// This file holds what a FIFO operation tells the package's other concerns, which a grant
// does not need followed.

// granting tells the package's other concerns of a FIFO operation that granted something,
// under l.mu: the deadlock watch counts it (waitKey), a checked job guards the data of the
// read grants (buffers.go), a grant to another process learns whether it may say recycle
// (mirror.go), and an armed checkpoint takes its snapshot when the first request of its
// round is among the granted ones, before any of them sees the data (checkpoint.go).
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

// ungranting tells the other concerns that the grant of r, if it holds one, ends: a checked
// job unguards its data (buffers.go); l.mu held.
func (l *location) ungranting(r *fifo.Request) {
	if l.j.bufs.checked && r.State() == fifo.Granted {
		l.guardReads([]*fifo.Request{r}, -1)
	}
}
