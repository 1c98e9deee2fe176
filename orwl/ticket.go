package orwl

import (
	"context"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/internal/release"
	"github.com/orwl-go/orwl/trace"
)

// This file holds what the deadlock watch, the trace, Resize and Handle.Test need of a
// ticket, local or remote: the ticket interface and its methods for either kind, with
// Waiting, which tells the deadlock watch of a wait and polls the mesh meanwhile; and what
// they, the checkpoints and a failure need of a request in a FIFO of this process (queued).
// A grant makes one call here, Waiting (location.go has ticketBase, local.go and remote.go
// the rest).

// ticket is a request of a handle of this process, on a location of this process
// (localTicket) or of another (remoteTicket): what deadlock detection and tracing need of
// it, without knowing which.
type ticket interface {
	handle.Ticket
	// where is the location's number in the job.
	where() uint32
	// describeWait fills in what this process knows of the grant the ticket waits for: the
	// tasks that hold it (a local location), or the ticket's id (a remote one, whose owner
	// knows the holders). It returns false when the ticket is no longer waiting.
	describeWait(w *waitRecord) bool
	// traceGrant records the grant in the location's trace, if any, and returns the flow of
	// the release that caused it; traceRelease records the release and its flow.
	traceGrant(task int, m fifo.Mode) trace.FlowID
	traceRelease(task int, m fifo.Mode, flow trace.FlowID)
	// failGrant fails the location of the granted ticket with err (fail.go).
	failGrant(err error)
	// pairAwait is Waiting's poll for a request of a pair (pair.go); it reports false for
	// any other request, which polls the mesh.
	pairAwait(ctx context.Context) bool
}

// queued is a request in a FIFO of this process, found through its fifo.Request's Tag: a
// local ticket, or a request served for a handle of another process (*served).
type queued interface {
	// failed delivers the job's failure to a request that is still waiting (fail.go).
	failed(err error)
	// task is the task whose handle made the request.
	task() int
	// round is the round of an iterative handle's request (checkpoint.go), -1 for others.
	round() int
}

func (t *localTicket) task() int  { return t.spec.Task }
func (t *localTicket) round() int { return t.rnd }
func (s *served) task() int       { return s.taskID }
func (s *served) round() int      { return s.rnd }

// Waiting implements handle.Ticket: it tells the deadlock watch that the task waits
// (detector.block), then, in a job of several processes, reads the messages of processes
// of this host on the task's goroutine while they come quickly (transport.Poller.Poll), so
// that a grant that comes in one needs no wake-up; meanwhile the task counts as polling.
//
// A ticket of a pair (pair.go) polls its round's counter instead, and grants itself; before
// it parks it says in the pair's header that it sleeps, so that the other side's next store
// comes with a message that wakes it.
func (b *ticketBase) Waiting(ctx context.Context) {
	polling := b.j.det.block(b.spec.Task, b)
	if b.j.node == nil {
		return
	}
	release.Bool(polling, true) // a hint to the process's idle check (detector.idle)
	if !b.self.pairAwait(ctx) {
		b.j.task[b.spec.Task].poller.Poll(b.settled, ctx.Done())
	}
	release.Bool(polling, false)
}

// settled reports whether the latch is no longer pending.
func (b *ticketBase) settled() bool { return b.latch.State() != handle.LatchPending }

// Traced implements handle.Ticket: the task's observer records the step.
func (b *ticketBase) Traced(h *handle.Handle, e handle.Event) {
	b.j.task[b.spec.Task].obs.traced(h, b.self, e)
}

// Granted reports whether the FIFO granted t: the grants of one FIFO operation reach their
// latches one by one after the location's lock, but the FIFO's state is decided under it.
func (t *localTicket) Granted() bool {
	if t.latch.Granted() || t.pairAwaits() && t.loc.pairPoll(t) {
		return t.latch.Granted()
	}
	l := t.loc
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && t.req.State() == fifo.Granted
}

func (t *localTicket) Resize(n int) ([]byte, error) {
	l := t.loc
	return l.j.bufs.resize(&l.data, &l.stale, n, l.dataAlloc()), nil
}

// Granted reports whether t's grant arrived, waiting for a batch being delivered (granted).
func (t *remoteTicket) Granted() bool {
	if t.latch.Granted() || t.paired() != nil && t.pairPoll() {
		return t.latch.Granted()
	}
	t.q.sendMu.Lock()
	defer t.q.sendMu.Unlock()
	return t.latch.Granted()
}

func (t *remoteTicket) Resize(n int) ([]byte, error) {
	q := t.q
	return q.r.j.bufs.resize(&q.mirror, &q.stale, n, q.r.j.bufs.alloc), nil
}

func (t *localTicket) where() uint32 { return t.loc.index }

func (t *localTicket) describeWait(w *waitRecord) bool {
	if t.loc.pairWait(t, w) {
		return true
	}
	return t.loc.describeWait(&t.req, w)
}

func (t *localTicket) traceGrant(task int, m fifo.Mode) trace.FlowID {
	return t.loc.traceGrant(task, m)
}

func (t *localTicket) traceRelease(task int, m fifo.Mode, flow trace.FlowID) {
	t.loc.traceRelease(task, m, flow)
}

// traceGrant records a grant of l in its trace, if any, and returns the flow of the release
// that caused it, for a local ticket and a grant sent to another process alike.
func (l *location) traceGrant(task int, m fifo.Mode) trace.FlowID {
	l.fq.Grant(task, m)
	return trace.FlowID(l.lastFlow.Load())
}

// traceRelease records a release of l and its flow, for the grant it causes. The flow is 0
// when the job is not traced: nothing is written then.
func (l *location) traceRelease(task int, m fifo.Mode, flow trace.FlowID) {
	if l.lastFlow.Load() != uint64(flow) {
		l.lastFlow.Store(uint64(flow))
	}
	l.fq.Release(task, m)
}

func (t *remoteTicket) where() uint32 { return t.q.loc }

func (t *remoteTicket) describeWait(w *waitRecord) bool {
	r := t.q.r
	r.mu.Lock() // the id changes when the ticket is retired
	w.Loc, w.Ticket = int(t.q.loc), t.id
	r.mu.Unlock()
	return !t.latch.Granted()
}

func (t *remoteTicket) traceGrant(int, fifo.Mode) trace.FlowID { return t.grantFlow }

func (t *remoteTicket) traceRelease(_ int, _ fifo.Mode, flow trace.FlowID) { t.releaseFlow = flow }
