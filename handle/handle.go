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
	"unsafe"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/internal/hugemem"
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
// is done (CloseAll), and the channel its waits are woken on. A handle joins its owner's set when it requests and
// leaves it when it holds and queues nothing, so the set stays as small as what is in use
// however many handles the owner makes.
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

func (o *Owner) add(h *Handle) {
	h.slot = len(o.active)
	o.active = append(o.active, h)
}

func (o *Owner) remove(h *Handle) {
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

// Errors of handle misuse; every error returned by a Handle is its owner's error (an *Error
// unless NewOwner was told otherwise) wrapping one of these, a Queue's error, or a context's
// error.
var (
	ErrNotRequested = errors.New("no request is queued (before the schedule, or a one-shot handle already used)")
	ErrHeld         = errors.New("already acquired")
	ErrNotHeld      = errors.New("not acquired")
	ErrClosed       = errors.New("handle is closed")
	ErrReadOnly     = errors.New("a read handle cannot resize its location")
	ErrNegativeSize = errors.New("negative size")
	ErrRequested    = errors.New("already requested")
	// ErrReadOnlyData and ErrStaleData are misuses of mapped data that a runtime which guards
	// its buffers (package internal/hugemem's Protect and Retire) makes fault, and that
	// Section, or whoever recovers the fault (Owner.Misuse), reports.
	ErrReadOnlyData = errors.New("write through a read handle's data")
	ErrStaleData    = errors.New("use of data after its release or a Resize")
)

// misuse explains p, a panic, when it is a fault on a buffer that the runtime guards: a
// write to read-only data (a read grant's), or a use of a buffer retired when Resize
// replaced it or when the job freed it. It returns nil for any other panic.
func misuse(p any) error {
	f, ok := p.(interface{ Addr() uintptr }) // a fault's panic (runtime/debug.SetPanicOnFault)
	if !ok {
		return nil
	}
	switch a, off, size, ok := hugemem.Find(f.Addr()); {
	case ok && a == hugemem.ReadOnly:
		return fmt.Errorf("%w (byte %d of %d): copy the data to change it, or change it through a write handle", ErrReadOnlyData, off, size)
	case ok && a == hugemem.NoAccess:
		return fmt.Errorf("%w (byte %d of %d): after Resize use the slice it returns (or Map again), and no slice after Release or after Run returns", ErrStaleData, off, size)
	}
	return nil
}

// Misuse explains p, a panic recovered from the owner's code, when it is a fault on a guarded
// buffer (see ErrReadOnlyData): the error names the handle of the owner whose data holds the
// faulting address, if any. It returns nil for any other panic.
func (o *Owner) Misuse(p any) error {
	err := misuse(p)
	if err == nil {
		return nil
	}
	if h := holding(o.active, p); h != nil {
		return h.fail("use of the data", err)
	}
	return err
}

// holding returns the handle of hs whose mapped data holds the address of p, a fault's
// panic, or nil.
func holding(hs []*Handle, p any) *Handle {
	addr := p.(interface{ Addr() uintptr }).Addr()
	for _, h := range hs {
		if b := h.Map(); len(b) > 0 && addr >= uintptr(unsafe.Pointer(&b[0])) && addr < uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b)) {
			return h
		}
	}
	return nil
}

// Error is a failed handle operation, unless the handle's owner makes its errors itself
// (NewOwner). It names the task, the location and the position.
type Error struct {
	Op   string // "acquire", "release", ...
	Spec Spec
	Err  error
}

// Error names the task, the operation, the handle and the position, then the cause.
func (e *Error) Error() string {
	return fmt.Sprintf("task %d: %s of %s handle on %s (position %d): %v",
		e.Spec.Task, e.Op, e.Spec.Mode, e.Spec.Location, e.Spec.Pos, e.Err)
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

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

// Closed returns a handle of o (nil: an owner of its own) on which every operation fails with
// err: the result of an insert that was invalid, so that its mistake is reported where the
// handle is used.
func Closed(spec Spec, err error, o *Owner) *Handle {
	h := New(nil, spec, o)
	h.closed, h.cause = true, err
	return h
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

// settle keeps h in its owner's set exactly while it holds or has queued a request.
func (h *Handle) settle() {
	switch active := h.Active(); {
	case active && h.slot < 0:
		h.owner.add(h)
	case !active && h.slot >= 0:
		h.owner.remove(h)
	}
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

// Section acquires h, calls fn with the mapped data, and releases h. It returns the first
// error of the three steps. The data is fn's until it returns, and only the slice that the
// last Resize returned is valid: see Map.
//
// When fn fails or panics, a read handle is released as usual, but a write handle fails its
// grant (Ticket.Fail): the data may be half-written, so it is never handed on, and the
// requests that wait on the location, and those that come later, fail with an error that
// names h and fn's error (or with the error it led to, such as the task's own). The handle
// is then closed. A fault of fn on a buffer that the runtime guards (see ErrReadOnlyData)
// is fn's failure, with an error that says which misuse it was; any other panic goes on.
func (h *Handle) Section(ctx context.Context, fn func(data []byte) error) (err error) {
	if err := h.Acquire(ctx); err != nil {
		return err
	}
	done := false
	defer func() {
		var p any
		if !done {
			p = recover()
		}
		if p, err = EndSection([]*Handle{h}, err, done, p); p != nil {
			panic(p) // on top of fn's frames, still on the stack
		}
	}()
	err = fn(h.Map())
	done = true
	return err
}

// EndSection ends a section over hs, handles of one owner acquired in this order (Section's
// one handle, or several taken together), whose function returned err, or did not return
// (done false) and panicked with p, which the caller's deferred function recovered (nil
// when the function's goroutine exits without a panic). It returns the panic to go on with,
// if any, and the section's error.
//
// A fault of the function on a buffer that the runtime guards (see ErrReadOnlyData) is the
// function's failure, named after the handle whose data it hit (after hs[0] when none of
// them maps that address, as for a stale slice). Then the handles end, the last one first:
// a read handle is released, and so is a write handle when the function succeeded; when it
// failed or panicked, a write handle that still holds its grant fails it (see Section) and
// is closed. The section's error is the function's, or else the releases' (one alone as it
// is, several joined).
func EndSection(hs []*Handle, err error, done bool, p any) (any, error) {
	if merr := misuse(p); merr != nil {
		switch h := holding(hs, p); {
		case h != nil:
			err = h.fail("section", merr)
		case len(hs) > 0:
			err = hs[0].fail("section", merr)
		default:
			err = merr
		}
		done, p = true, nil
	}
	var errs []error
	for i := len(hs) - 1; i >= 0; i-- {
		h := hs[i]
		if h.spec.Mode == fifo.Write && h.held != nil && (!done || err != nil) {
			cause := err
			if !done {
				cause = errors.New("the section panicked")
			}
			h.abort(cause)
		} else if rerr := h.Release(); rerr != nil {
			errs = append(errs, rerr)
		}
	}
	if err == nil && len(errs) > 0 {
		err = errs[0]
		if len(errs) > 1 {
			err = errors.Join(errs...)
		}
	}
	return p, err
}

// abort fails the grant h holds after its write section failed with cause, and closes h.
func (h *Handle) abort(cause error) {
	t := h.held
	h.held, h.closed = nil, true
	if h.traced {
		t.Traced(h, Releasing)
	}
	t.Fail(fmt.Errorf("%s: its write section failed: %w", h.spec, cause))
	if h.next != nil {
		h.next.Cancel()
		h.next = nil
	}
	h.settle()
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

// Active reports whether h still holds or has queued a request.
func (h *Handle) Active() bool { return h.held != nil || h.next != nil }
