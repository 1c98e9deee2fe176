package handle

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/orwl-go/orwl/internal/hugemem"
)

// This file holds the errors of a handle, apart from handle.go, which only returns them:
// the misuses it reports (ErrHeld...), the faults on guarded buffers it explains (misuse),
// the *Error type that names the handle, and how a handle makes its errors (fail).

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
	// ErrNotPending is returned by Latch.Wait on a latch that was never started or was
	// cancelled.
	ErrNotPending = errors.New("request is not pending")
)

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

// String describes the handle as errors name it: `task 3's write handle on task 5 "bound"
// (position 1)`.
func (s Spec) String() string {
	return fmt.Sprintf("task %d's %s handle on %s (position %d)", s.Task, s.Mode, s.Location, s.Pos)
}

// fail is h's error for a failed operation op: its owner's, or an *Error.
func (h *Handle) fail(op string, err error) error {
	if h.owner.newErr != nil {
		return h.owner.newErr(op, h.spec, err)
	}
	return &Error{Op: op, Spec: h.spec, Err: err}
}

// misused returns the error of op ("request", "acquire" or "release"), which h's state does
// not allow.
func (h *Handle) misused(op string) error {
	switch {
	case h.closed:
		return h.closedErr(op)
	case op == "request":
		return h.fail(op, ErrRequested)
	case op == "acquire" && h.held != nil:
		return h.fail(op, ErrHeld)
	case op == "acquire":
		return h.fail(op, ErrNotRequested)
	}
	return h.fail(op, ErrNotHeld)
}

// closedErr is the error of op on a closed h: why it was never usable, or ErrClosed.
func (h *Handle) closedErr(op string) error {
	if h.cause != nil {
		return h.fail(op, h.cause)
	}
	return h.fail(op, ErrClosed)
}
