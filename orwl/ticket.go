package orwl

import (
	"context"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

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
	// failGrant fails the location of the granted ticket with err (see Task.failedGrants).
	failGrant(err error)
}

// ticketBase is what local and remote tickets share: the grant's latch, the handle that made
// the request, and the ticket itself. The deadlock detector's slot points to it.
type ticketBase struct {
	latch handle.Latch
	h     *handle.Handle
	spec  handle.Spec // h's, read without copying it on every request
	rnd   int         // the round of its request (see queued.round)
	self  ticket
	j     *job
}

// Fail keeps the grant of a write section that failed until its task ends (runTask), so
// that nothing is handed on and the location fails with the job's error when the task
// fails, as it usually does.
func (b *ticketBase) Fail(err error) {
	t := b.j.task[b.spec.Task]
	t.failedGrants = append(t.failedGrants, failedGrant{b.self, err})
}

// Waiting implements handle.Ticket: it tells the deadlock detector that the ticket's task
// is about to wait on it (detector.block), then, in a job of several processes, reads the
// messages of processes of this host on the waiting task's goroutine while they come
// quickly (transport.Mesh.Poll): a grant that comes in one, or the release that causes it,
// then needs no wake-up of the task. Meanwhile the task counts as waiting (detector.idle),
// so that, when no other task of the process computes, the task and the readers poll as
// long as an idle process's readers do, not only Config.Spin: a grant a little later than
// that would otherwise cost two wake-ups, which delay the task's next release past its
// neighbours' Spin in turn, iteration after iteration.
func (b *ticketBase) Waiting(ctx context.Context) {
	polling := b.j.det.block(b.spec.Task, b)
	n := b.j.node
	if n == nil {
		return
	}
	polling.Store(true)
	n.mesh.Poll(b.settled, ctx.Done())
	polling.Store(false)
}

// Traced implements handle.Ticket: the task's observer records the step.
func (b *ticketBase) Traced(h *handle.Handle, e handle.Event) {
	b.j.task[b.spec.Task].obs.traced(h, b.self, e)
}

// settled reports whether the latch is no longer pending.
func (b *ticketBase) settled() bool { return b.latch.State() != handle.LatchPending }
