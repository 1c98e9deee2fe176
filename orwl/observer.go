package orwl

import (
	"github.com/orwl-go/orwl/handle"
	"github.com/orwl-go/orwl/trace"
)

// observer follows the handles of one task for the trace, when tracing is on: their tickets
// tell it each step (ticketBase.Traced). It runs on the task's goroutine.
type observer struct {
	task     *Task
	tr       *trace.Track
	wait     trace.Span
	sections map[*handle.Handle]trace.Span
}

// observe makes o the observer of task t, recording into tr, and reports whether t is traced
// (tr is not nil), so that an untraced access tells nobody (handle.NewOwner).
func (o *observer) observe(t *Task, tr *trace.Track) bool {
	if tr == nil {
		return false
	}
	*o = observer{task: t, tr: tr}
	return true
}

// traced records step e of handle h's request t.
func (o *observer) traced(h *handle.Handle, t ticket, e handle.Event) {
	spec := h.Spec()
	loc := trace.Loc(o.task.job.locationAt(t.where()))
	switch e {
	case handle.Requested:
		o.tr.Request(loc, spec.Mode, spec.Pos)
	case handle.WaitStart:
		o.wait = o.tr.BeginWait(loc, spec.Mode, spec.Pos)
	case handle.WaitEnd:
		o.wait.End()
		o.wait = trace.Span{}
	case handle.Acquired:
		o.tr.Grant(loc, spec.Mode, t.traceGrant(o.task.id, spec.Mode))
		if o.sections == nil {
			o.sections = map[*handle.Handle]trace.Span{}
		}
		o.sections[h] = o.tr.BeginSection(loc, spec.Mode)
	case handle.Releasing:
		o.sections[h].End()
		delete(o.sections, h)
		t.traceRelease(o.task.id, spec.Mode, o.tr.Release(loc, spec.Mode))
	}
}

// endTransfer ends the span of a message's data arriving, if any (requester.grantSink,
// owner.writeBackSink), once the message is handled; a job that records no trace begins
// none.
func (j *job) endTransfer(s *trace.Span) {
	if j.rec == nil {
		return
	}
	s.End()
	*s = trace.Span{}
}
