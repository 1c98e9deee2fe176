package handle

import (
	"context"
	"errors"
	"fmt"
)

// This file holds what the handles of one owner (a task) share, apart from handle.go so
// that a grant's path reads alone: the Owner, the set of its handles in use, their making
// and their end (New, Close, CloseAll, Closed, abandon, giveUp), and the events a traced
// owner's tickets are told (Event, trace).

// Event is a step of the life of a handle's request, which the handles of a traced owner
// tell its ticket (Ticket.Traced).
type Event uint8

const (
	// Requested: the handle placed the request.
	Requested Event = iota
	// WaitStart: Acquire blocks on the request, which is not granted yet.
	WaitStart
	// WaitEnd: the wait that WaitStart announced is over, granted or not.
	WaitEnd
	// Acquired: the handle holds the grant.
	Acquired
	// Releasing: the handle is about to release the grant, or to fail it (Ticket.Fail); the
	// next grant has not happened yet.
	Releasing
)

// Owner is what the handles of one owner share (a task: one goroutine uses them, one at a
// time): whether their tickets are told of their life (Ticket.Traced), the set of those
// that hold or have queued a request, so that they can all be ended at once when the owner
// is done (CloseAll), and the channel its waits are woken on. A handle joins its owner's
// set when it requests and leaves it when it holds and queues nothing, so the set stays as
// small as what is in use however many handles the owner makes.
type Owner struct {
	traced  bool
	newErr  func(op string, s Spec, err error) error // makes its handles' errors; nil: *Error
	active  []*Handle
	wake    chan struct{}
	ctx     context.Context // the context whose end wakes the waits (Watch)
	watched <-chan struct{} // its Done
}

// NewOwner returns an owner whose handles tell their tickets of their life when traced
// (Ticket.Traced). A failed
// operation of its handles returns the error that newErr makes of the operation, the
// handle's Spec and the cause, so that a runtime presents them under its own type
// (package orwl's HandleError); nil makes an *Error.
func NewOwner(traced bool, newErr func(op string, s Spec, err error) error) *Owner {
	return &Owner{traced: traced, newErr: newErr, wake: make(chan struct{}, 1)}
}

// Watch makes the end of ctx wake the owner's waits on ctx at once, so that Acquire blocks on
// one channel instead of selecting on ctx.Done() too (Acquire works with any context, only
// faster with this one, or one with the same Done). It returns a function that stops
// watching, as context.AfterFunc. Acquire compares its context with ctx, so ctx's type must
// be comparable, as that of every context of package context is.
func (o *Owner) Watch(ctx context.Context) (stop func() bool) {
	o.ctx, o.watched = ctx, ctx.Done()
	return context.AfterFunc(ctx, func() { poke(o.wake) })
}

// flip adds h to o's set, or removes it when it is there. Not inlined, so that settle, which
// calls it when h's activity changed, is inlined into the calls of every request and release.
//
//go:noinline
func (o *Owner) flip(h *Handle) {
	if h.slot < 0 {
		h.slot = len(o.active)
		o.active = append(o.active, h)
		return
	}
	last := len(o.active) - 1
	m := o.active[last]
	o.active[h.slot], m.slot = m, h.slot
	o.active[last] = nil
	o.active = o.active[:last]
	h.slot = -1
}

// Len returns the number of the owner's handles that hold or have queued a request.
func (o *Owner) Len() int { return len(o.active) }

// CloseAll closes every handle of o that holds or has queued a request (see Handle.Close)
// and returns their errors, joined.
func (o *Owner) CloseAll() error {
	var errs []error
	for len(o.active) > 0 {
		if err := o.active[len(o.active)-1].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settle keeps h in its owner's set exactly while it holds or has queued a request.
func (h *Handle) settle() {
	if h.Active() != (h.slot >= 0) {
		h.owner.flip(h)
	}
}

// Active reports whether h still holds or has queued a request.
func (h *Handle) Active() bool { return h.held != nil || h.next != nil }

// New returns a handle of spec on queue q, of owner o, that has not requested yet. With o
// nil, the handle is its own owner, not traced.
func New(q Queue, spec Spec, o *Owner) *Handle {
	if o == nil {
		o = NewOwner(false, nil)
	}
	return &Handle{spec: spec, queue: q, owner: o, traced: o.traced, slot: -1}
}

// Closed returns a handle of o (nil: an owner of its own) on which every operation fails with
// err: the result of an insert that was invalid, so that its mistake is reported where the
// handle is used.
func Closed(spec Spec, err error, o *Owner) *Handle {
	h := New(nil, spec, o)
	h.closed, h.cause = true, err
	return h
}

// Close releases the grant h holds and cancels the request it has queued; every later
// operation on h fails with ErrClosed. Closing a closed handle does nothing.
func (h *Handle) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	var err error
	if h.held != nil {
		err = h.Release()
	}
	if h.next != nil {
		h.next.Cancel()
		h.next = nil
	}
	h.settle()
	return err
}

// abandon cancels h's queued request after a failed wait and closes h.
func (h *Handle) abandon(ctx context.Context, err error) error {
	h.next.Cancel()
	h.next, h.closed = nil, true
	h.settle()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return h.fail("acquire", err)
}

// giveUp gives the grant h holds back and closes h, after its next round's request failed
// with err: nothing was written, so the grant goes back unchanged.
func (h *Handle) giveUp(err error) error {
	h.held.Cancel()
	h.held, h.closed = nil, true
	h.settle()
	return err
}

// trace tells t of step e of h's life, when h's owner is traced.
func (h *Handle) trace(t Ticket, e Event) {
	if h.traced {
		t.Traced(h, e)
	}
}
