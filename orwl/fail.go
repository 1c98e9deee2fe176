package orwl

import (
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/transport"
)

// This file holds a grant that fails: a write section that failed keeps its grant until its
// task ends (ticketBase.Fail, Task.failedGrants), then fails the location (failGrant), in
// this process (location.fail) or at its owner (a release that says failed); and a request
// that an owner refuses (owner.refuse).

// Fail keeps the grant of a write section that failed until its task ends (runTask), so
// that nothing is handed on and the location fails with the job's error when the task
// fails, as it usually does.
func (b *ticketBase) Fail(err error) {
	t := b.j.task[b.spec.Task]
	t.failedGrants = append(t.failedGrants, failedGrant{b.self, err})
}

func (t *localTicket) failGrant(err error) { t.loc.fail(err) }

// failGrant gives the grant back as failed: the owner fails the location with err. In a
// failed job it sends nothing: the owner fails with the job.
func (t *remoteTicket) failGrant(err error) {
	t.q.r.sendRelease(t, releaseMsg{failed: true}, []byte(err.Error()), true)
}

// failed fails the waiting request with the job's failure (queued.failed).
func (t *localTicket) failed(err error) { t.latch.Fail(err) }

// failed does nothing: the requester learns of the job's failure itself.
func (s *served) failed(error) {}

// refuse answers request m of rank from, on a location that is not here (err says why),
// with a refusal: the requester fails the request with err's text.
func (o *owner) refuse(from int, m requestMsg, err error) {
	o.j.log.Error("orwl: request refused", "rank", from, "err", err)
	o.mesh.Send(from, transport.Owner, grantMsg{loc: m.loc, ticket: m.ticket, refused: true}.header(), []byte(err.Error()))
}

// fail stops l for good: every request still waiting gets err, and nothing is granted any
// more (a release does nothing), so no task ever sees data that a failed job left behind.
func (l *location) fail(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	var waiting []queued
	l.fifo.Each(func(r *fifo.Request) { waiting = append(waiting, r.Tag.(queued)) })
	for _, p := range l.pending {
		waiting = append(waiting, p.req.Tag.(queued))
	}
	if p := l.pair; p != nil && !p.dissolved.Load() && p.waiting != nil {
		waiting = append(waiting, p.waiting)
	}
	l.pending = nil
	l.mu.Unlock()
	for _, q := range waiting {
		q.failed(err)
	}
}
