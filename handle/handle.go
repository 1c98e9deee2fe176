// Package handle implements ORWL handles: the objects through which a task requests,
// acquires, maps and releases one location.
//
// A handle places its request in the location's FIFO (Request), later blocks until that
// request is granted (Acquire), sees the data while it holds the grant (Map), and releases it
// (Release), which grants the next entry. Section does all of that around a function.
// An iterative handle (ORWL's handle2) requests its next iteration, in the same mode, at
// the moment it is acquired, so every location cycles through its handles in the same order
// iteration after iteration. A one-shot handle serves one access.
//
// A handle talks to its location through the Queue interface, which this package owns: the
// runtime supplies a local FIFO or a proxy for a location of another process. Every request
// a queue hands out carries a Latch, the one life cycle of a grant (pending, then granted,
// failed or cancelled), on which Acquire waits. This package knows nothing of tasks'
// scheduling, of the network, or of how data is stored.
package handle

import (
	"context"
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/fifo"
)

// Ticket is one request of a handle in a Queue, from the moment it is requested until it is
// released or cancelled.
type Ticket interface {
	// Latch is the request's grant: Acquire waits on it.
	Latch() *Latch
	// Waiting is called by Acquire when the latch is pending, before it sleeps on it, on the
	// waiter's goroutine: the queue learns who waits on what (deadlock detection) and may
	// fetch the grant itself (one that a process of the same host writes to shared memory).
	// It returns once the latch is no longer pending, ctx is done, or it gives up.
	Waiting(ctx context.Context)
	// Granted reports, without blocking for long, whether the queue has granted the request,
	// even if the grant has not reached the latch yet: every grant that the queue decided
	// before the caller's last synchronisation with it (its own acquire or release, or a
	// release by another task that happens before) is reported.
	Granted() bool
	// Release ends a granted access; the next entry of the FIFO is granted.
	Release() error
	// Fail ends a granted access that went wrong (a write section that failed): nothing is
	// ever handed on from it. The queue keeps the grant meanwhile, so nobody else sees the
	// location, and fails the location (every request waiting on it, or made later) at the
	// latest when the handle's owner is done, with err or the error it led to.
	Fail(err error)
	// Cancel withdraws the ticket: its latch is cancelled, and the grant is given back now if
	// it had arrived (the data unchanged), as soon as it arrives otherwise.
	Cancel()
	// Data is the location's data as the holder of the granted ticket sees it; never nil.
	Data() []byte
	// Resize changes the size of the data of a granted write ticket and returns the new data.
	Resize(n int) ([]byte, error)
	// Traced tells the ticket of a traced owner's handle h (NewOwner) each step e of its
	// life, in order, on the goroutine that uses h, so that the runtime traces it: the
	// ticket knows what the trace needs (its location, what its grant and release link).
	Traced(h *Handle, e Event)
}

// Queue is the FIFO of one location as a handle sees it.
type Queue interface {
	// Request appends a request of h, in h's mode, and returns its ticket at once: the
	// position is fixed when Request returns. reuse, when not nil, is a ticket of this queue
	// that h no longer uses; the queue may recycle it so steady iteration allocates nothing.
	Request(h *Handle, reuse Ticket) (Ticket, error)
}

// Spec describes a handle: whose it is, on what, and how it accesses.
type Spec struct {
	Task      int       // the task that owns the handle
	Location  string    // the location, as it should read in errors, e.g. `task 3 "bound"`
	Pos       int       // initial FIFO position (0 for requests made after the schedule)
	Mode      fifo.Mode // Read or Write
	Iterative bool      // request the next iteration at every acquire
}

// String describes the handle as errors name it: `task 3's write handle on task 5 "bound"
// (position 1)`.
func (s Spec) String() string {
	return fmt.Sprintf("task %d's %s handle on %s (position %d)", s.Task, s.Mode, s.Location, s.Pos)
}

// Handle is one task's access path to one location. A Handle is used by one goroutine at a
// time (its task); it is not safe for concurrent use.
type Handle struct {
	spec   Spec
	queue  Queue
	owner  *Owner
	traced bool   // owner.traced
	slot   int    // index in owner.active, or -1
	next   Ticket // requested, for the next Acquire
	held   Ticket // granted and acquired, until Release
	spare  Ticket // released, offered back to the queue
	closed bool
	cause  error // why a handle made by Closed was never usable; nil otherwise
	rounds int   // acquires so far: the round of the request an iterative handle has queued
}

// New returns a handle of spec on queue q, of owner o, that has not requested yet. With o
// nil, the handle is its own owner, not traced.
func New(q Queue, spec Spec, o *Owner) *Handle {
	if o == nil {
		o = NewOwner(false, nil)
	}
	return &Handle{spec: spec, queue: q, owner: o, traced: o.traced, slot: -1}
}

// Spec returns the description of h.
func (h *Handle) Spec() Spec { return h.spec }

// Acquires returns how many times h was acquired: for an iterative handle, the round of the
// request it has queued, counted from its first (see package orwl's checkpoints).
func (h *Handle) Acquires() int { return h.rounds }

// Mode returns h's access mode.
func (h *Handle) Mode() fifo.Mode { return h.spec.Mode }

func (h *Handle) fail(op string, err error) error {
	if h.owner.newErr != nil {
		return h.owner.newErr(op, h.spec, err)
	}
	return &Error{Op: op, Spec: h.spec, Err: err}
}

func (h *Handle) closedErr(op string) error {
	if h.cause != nil {
		return h.fail(op, h.cause)
	}
	return h.fail(op, ErrClosed)
}

// Request places h's request in its location's FIFO now, at the tail. It never blocks.
// The runtime calls it at the schedule; a one-shot handle made after the schedule is
// requested when it is made, and may be requested again once it has released.
func (h *Handle) Request() error {
	switch {
	case h.closed:
		return h.closedErr("request")
	case h.next != nil:
		return h.fail("request", ErrRequested)
	}
	return h.request()
}

func (h *Handle) request() error {
	t, err := h.queue.Request(h, h.spare)
	h.spare = nil
	if err != nil {
		return h.fail("request", err)
	}
	h.next = t
	h.settle()
	if h.traced {
		t.Traced(h, Requested)
	}
	return nil
}

// Acquire blocks until h's request is granted, then holds the grant until Release. An
// iterative handle requests its next iteration before Acquire returns.
//
// When ctx is done, Acquire fails even if the grant is there (as in
// golang.org/x/sync/semaphore): it returns an error wrapping ctx.Err() (and the context's
// cause, if any), the request is cancelled so the FIFO keeps moving (a grant that arrived is
// given back unchanged), and h is closed. Whether the grant or the context's end came first
// is decided once, after the wait: a context done by then wins, so a cancellation that
// happens before the grant always wins, whoever wakes the waiter. When
// Acquire fails for any reason, including a failed request (a failed job) or a failed
// re-request of an iterative handle, h holds nothing and is closed.
func (h *Handle) Acquire(ctx context.Context) error {
	switch {
	case h.closed:
		return h.closedErr("acquire")
	case h.held != nil:
		return h.fail("acquire", ErrHeld)
	case h.next == nil:
		return h.fail("acquire", ErrNotRequested)
	}
	t := h.next
	if l := t.Latch(); !l.Granted() { // Wait looks at ctx before it parks
		if h.traced {
			t.Traced(h, WaitStart)
		}
		t.Waiting(ctx)
		err := l.Wait(ctx, h.owner.wake, ctx == h.owner.ctx || ctx.Done() == h.owner.watched)
		if h.traced {
			t.Traced(h, WaitEnd)
		}
		if err != nil {
			return h.abandon(ctx, err)
		}
	}
	// The one decision between the grant and the context: a context found done once the
	// grant is seen wins, and the grant is given back (a grant seen first is kept: that
	// cancellation came after it).
	if err := ctx.Err(); err != nil {
		return h.abandon(ctx, err)
	}
	h.next, h.held = nil, t
	h.rounds++
	if h.traced {
		t.Traced(h, Acquired)
	}
	if !h.spec.Iterative {
		return nil
	}
	if err := h.request(); err != nil {
		h.held, h.closed = nil, true
		t.Cancel() // nothing was written: the grant goes back unchanged
		h.settle()
		return err
	}
	return nil
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

// Test reports, without waiting for the FIFO to move, whether h's request is granted, so
// that Acquire would return at once. It sees every grant decided before the caller's last
// synchronisation with the location's FIFO: its own acquire or release of a handle on it, or
// a release by another task that happens before. So when an Acquire returns, Test reports
// true for every other request of the caller that was granted in the same group, whether
// the location is in this process or another. A grant decided later may be reported later.
func (h *Handle) Test() bool {
	return !h.closed && h.held == nil && h.next != nil && h.next.Granted()
}

// Map returns the location's data between Acquire and Release, nil otherwise; the data of
// an empty location is an empty, non-nil slice. The slice of a read handle must not be
// modified; no slice may be used after Release, nor, after Resize, one of before.
func (h *Handle) Map() []byte {
	if h.held == nil {
		return nil
	}
	return h.held.Data()
}

// Resize changes the size of the location's data while h holds a write grant, keeping the
// common prefix and zero-filling the rest, and returns the new data (Map returns it too).
// Slices of the data from before, Section's included, are no longer valid.
func (h *Handle) Resize(n int) ([]byte, error) {
	switch {
	case h.held == nil:
		return nil, h.fail("resize", ErrNotHeld)
	case h.spec.Mode != fifo.Write:
		return nil, h.fail("resize", ErrReadOnly)
	case n < 0:
		return nil, h.fail("resize", fmt.Errorf("%w %d", ErrNegativeSize, n))
	}
	b, err := h.held.Resize(n)
	if err != nil {
		return nil, h.fail("resize", err)
	}
	return b, nil
}

// Release ends the access started by Acquire; the next entry of the FIFO is granted.
func (h *Handle) Release() error {
	t := h.held
	if t == nil {
		if h.closed {
			return h.closedErr("release")
		}
		return h.fail("release", ErrNotHeld)
	}
	h.held = nil
	if h.traced {
		t.Traced(h, Releasing)
	}
	err := t.Release()
	h.spare = t
	h.settle()
	if err != nil {
		return h.fail("release", err)
	}
	return nil
}
