package orwl

import (
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// waits tells the deadlock detector what the handles of one task block on. It is the task's
// handle.Observer when tracing is off, so an untraced access makes no other observer call.
type waits struct{ task *Task }

func (w waits) WaitStart(h *handle.Handle, t handle.Ticket) {
	w.task.job.det.block(w.task.id, t.(ticket).base())
}

// observer follows the handles of one task when tracing is on: for the deadlock detector,
// and for the trace. It runs on the task's goroutine.
type observer struct {
	waits
	tr       *trace.Track
	wait     trace.Span
	sections map[*handle.Handle]trace.Span
}

// observe makes the handle.Observer of task t: an observer when tr is not nil, the task's
// waits otherwise.
func (o *observer) observe(t *Task, tr *trace.Track) handle.Observer {
	*o = observer{waits: waits{t}, tr: tr}
	if tr == nil {
		return o.waits
	}
	return o
}

func (o *observer) Requested(h *handle.Handle, t handle.Ticket) {
	spec := h.Spec()
	o.tr.Request(o.task.job.traceLoc(t), spec.Mode, spec.Pos)
}

func (o *observer) WaitStart(h *handle.Handle, t handle.Ticket) {
	o.waits.WaitStart(h, t)
	spec := h.Spec()
	o.wait = o.tr.BeginWait(o.task.job.traceLoc(t), spec.Mode, spec.Pos)
}

func (o *observer) WaitEnd(h *handle.Handle, t handle.Ticket) {
	o.wait.End()
	o.wait = trace.Span{}
}

func (o *observer) Acquired(h *handle.Handle, t handle.Ticket) {
	loc, mode := o.task.job.traceLoc(t), h.Mode()
	o.tr.Grant(loc, mode, t.(ticket).traceGrant(o.task.id, mode))
	if o.sections == nil {
		o.sections = map[*handle.Handle]trace.Span{}
	}
	o.sections[h] = o.tr.BeginSection(loc, mode)
}

func (o *observer) Releasing(h *handle.Handle, t handle.Ticket) {
	o.sections[h].End()
	delete(o.sections, h)
	mode := h.Mode()
	t.(ticket).traceRelease(o.task.id, mode, o.tr.Release(o.task.job.traceLoc(t), mode))
}
