package orwl

import (
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// observer follows the handles of one task for the trace, when tracing is on. It runs on
// the task's goroutine.
type observer struct {
	task     *Task
	tr       *trace.Track
	wait     trace.Span
	sections map[*handle.Handle]trace.Span
}

// observe makes the handle.Tracer of task t: an observer recording into tr, or nil when tr
// is nil (tracing is off), so that an untraced access makes no call.
func (o *observer) observe(t *Task, tr *trace.Track) handle.Tracer {
	if tr == nil {
		return nil
	}
	*o = observer{task: t, tr: tr}
	return o
}

func (o *observer) Requested(h *handle.Handle, t handle.Ticket) {
	spec := h.Spec()
	o.tr.Request(o.task.job.traceLoc(t), spec.Mode, spec.Pos)
}

func (o *observer) WaitStart(h *handle.Handle, t handle.Ticket) {
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

// traceLoc names the location of ticket t for the trace.
func (j *job) traceLoc(t handle.Ticket) trace.Loc {
	return trace.Loc(j.locationAt(t.(ticket).where()))
}
