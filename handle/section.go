package handle

import (
	"context"
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/fifo"
)

// This file holds the data of a held handle (Map) and sections: an acquire, a function on
// the data and a release in one call, and what a section that fails or panics does to its
// grants. It is apart from handle.go because a grant's path does not go through it:
// Section only calls Acquire and Release.

// Map returns the location's data between Acquire and Release, nil otherwise; the data of
// an empty location is an empty, non-nil slice. The slice of a read handle must not be
// modified; no slice may be used after Release, nor, after Resize, one of before.
func (h *Handle) Map() []byte {
	if h.held == nil {
		return nil
	}
	return h.held.Data()
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
		if !done {
			var p any
			if p, err = EndSection([]*Handle{h}, err, false, recover()); p != nil {
				panic(p) // on top of fn's frames, still on the stack
			}
		}
	}()
	err = fn(h.Map())
	done = true
	if err == nil { // what EndSection does then
		return h.Release()
	}
	_, err = EndSection([]*Handle{h}, err, true, nil)
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
	h.trace(t, Releasing)
	t.Fail(fmt.Errorf("%s: its write section failed: %w", h.spec, cause))
	if h.next != nil {
		h.next.Cancel()
		h.next = nil
	}
	h.settle()
}
