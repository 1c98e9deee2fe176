package orwl

import (
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// observer follows the handles of one task: for the deadlock detector, and for the trace
// when tracing is on (tr not nil). It runs on the task's goroutine.
type observer struct {
	task     *Task
	tr       *trace.Track
	wait     trace.Span
	sections map[*handle.Handle]trace.Span
}

func (o *observer) Requested(h *handle.Handle, t handle.Ticket) {
	if o.tr == nil {
		return
	}
	spec := h.Spec()
	o.tr.Request(o.task.job.traceLoc(t), traceMode(spec.Mode), spec.Pos)
}

func (o *observer) WaitStart(h *handle.Handle, t handle.Ticket) {
	o.task.job.det.block(o.task.id, h, t)
	if o.tr != nil {
		spec := h.Spec()
		o.wait = o.tr.BeginWait(o.task.job.traceLoc(t), traceMode(spec.Mode), spec.Pos)
	}
}

func (o *observer) WaitEnd(h *handle.Handle, t handle.Ticket) {
	o.task.job.det.unblock(o.task.id)
	o.wait.End()
	o.wait = trace.Span{}
}

func (o *observer) Acquired(h *handle.Handle, t handle.Ticket) {
	if o.tr == nil {
		return
	}
	loc, mode := o.task.job.traceLoc(t), traceMode(h.Mode())
	var from trace.FlowID
	switch t := t.(type) {
	case *localTicket:
		from = trace.FlowID(t.loc.lastFlow.Load())
		t.loc.fq.Grant(o.task.id, mode)
	case *remoteTicket:
		from = t.grantFlow
	}
	o.tr.Grant(loc, mode, from)
	if o.sections == nil {
		o.sections = map[*handle.Handle]trace.Span{}
	}
	o.sections[h] = o.tr.BeginSection(loc, mode)
}

func (o *observer) Releasing(h *handle.Handle, t handle.Ticket) {
	if o.tr == nil {
		return
	}
	o.sections[h].End()
	delete(o.sections, h)
	mode := traceMode(h.Mode())
	id := o.tr.Release(o.task.job.traceLoc(t), mode)
	switch t := t.(type) {
	case *localTicket:
		t.loc.lastFlow.Store(uint64(id))
		t.loc.fq.Release(o.task.id, mode)
	case *remoteTicket:
		t.releaseFlow = id
	}
}

// traceMode converts a FIFO mode to the trace's.
func traceMode(m fifo.Mode) trace.Mode {
	if m == fifo.Write {
		return trace.Write
	}
	return trace.Read
}
