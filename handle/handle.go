package handle

import (
	"context"

	"github.com/orwl-go/orwl/fifo"
)

// Ticket is one request of a handle in a Queue, from Request until released or cancelled.
type Ticket interface {
	Latch() *Latch // the request's grant: Acquire waits on it
	// Waiting is called by Acquire, on the waiter's goroutine, before it sleeps on a pending
	// latch: the queue learns who waits, and may fetch the grant itself until the latch is
	// settled, ctx is done, or it gives up.
	Waiting(ctx context.Context)
	Release() error // ends a granted access; the next entry of the FIFO is granted
	Data() []byte   // the location's data as the holder of the granted ticket sees it; never nil

	// Not on a grant's path:
	Granted() bool                // granted by the queue, even if the grant has not reached the latch (Handle.Test)
	Fail(err error)               // ends a granted access that went wrong: nothing is handed on, the location fails
	Cancel()                      // withdraws the ticket; its grant goes back unchanged, now or when it comes
	Resize(n int) ([]byte, error) // resizes the data of a granted write ticket; returns the new data
	Traced(h *Handle, e Event)    // tells the ticket of a traced owner's handle h each step e of its life
}

// Queue is the FIFO of one location as a handle sees it.
type Queue interface {
	// Request appends a request of h and returns its ticket at once, its position fixed.
	// reuse, when not nil, is a ticket of this queue that h no longer uses, to recycle.
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

// Spec returns the description of h.
func (h *Handle) Spec() Spec { return h.spec }

// Acquires returns how many times h was acquired: for an iterative handle, the round of the
// request it has queued, counted from its first (see package orwl's checkpoints).
func (h *Handle) Acquires() int { return h.rounds }

// Mode returns h's access mode.
func (h *Handle) Mode() fifo.Mode { return h.spec.Mode }

// Request places h's request in its location's FIFO now, at the tail. It never blocks.
// The runtime calls it at the schedule; a one-shot handle made after the schedule is
// requested when it is made, and may be requested again once it has released.
func (h *Handle) Request() error {
	if h.closed || h.next != nil {
		return h.misused("request")
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
	h.trace(t, Requested)
	return nil
}

// Acquire blocks until h's request is granted, then holds the grant until Release; an
// iterative handle requests its next iteration before Acquire returns. When ctx is done,
// Acquire fails even if the grant is there (as in golang.org/x/sync/semaphore), with an
// error wrapping ctx.Err() and its cause: ctx is looked at after the wait, so a
// cancellation before the grant always wins. A failed Acquire cancels the request (a grant
// that arrived goes back unchanged) and closes h, which then holds nothing.
func (h *Handle) Acquire(ctx context.Context) error {
	if h.closed || h.held != nil || h.next == nil {
		return h.misused("acquire")
	}
	t := h.next
	var err error
	if l := t.Latch(); !l.Granted() { // Wait looks at ctx before it parks
		h.trace(t, WaitStart)
		if t.Waiting(ctx); !l.Granted() { // not fetched meanwhile
			err = l.Wait(ctx, h.owner.wake, ctx == h.owner.ctx || ctx.Done() == h.owner.watched)
		}
		h.trace(t, WaitEnd)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil { // the one decision between the grant and ctx
		return h.abandon(ctx, err)
	}
	h.next, h.held = nil, t
	h.rounds++
	h.trace(t, Acquired)
	if h.spec.Iterative {
		if err := h.request(); err != nil {
			return h.giveUp(err)
		}
	}
	return nil
}

// Release ends the access started by Acquire; the next entry of the FIFO is granted.
func (h *Handle) Release() error {
	t := h.held
	if t == nil {
		return h.misused("release")
	}
	h.held = nil
	h.trace(t, Releasing)
	err := t.Release()
	h.spare = t
	h.settle()
	if err != nil {
		return h.fail("release", err)
	}
	return nil
}
