package orwl

import (
	"context"

	"github.com/orwl-go/orwl/handle"
)

// Handle is one task's access path to one location. A task gets its handles from the
// inserts (ReadInsert, WriteInsert, ReadInsertOnce, WriteInsertOnce) and the requests made
// after the schedule (ReadRequest, WriteRequest), and uses them from its own goroutine only:
// a Handle is not safe for concurrent use. Every error a Handle returns is a *HandleError
// naming the task, the location and the FIFO position, wrapping one of the package's Err
// values (ErrNotHeld...), a context's error, or the job's failure.
type Handle struct{ h *handle.Handle }

// Acquire blocks until the handle's request is granted, then holds the grant until Release.
// An iterative handle requests its next iteration, in the same mode, before Acquire returns,
// so every location cycles through its handles in the schedule's order.
//
// When ctx is done, Acquire fails even if the grant is there, as in
// golang.org/x/sync/semaphore: it returns an error wrapping ctx.Err(), the request is
// cancelled (a grant that arrived is given back unchanged, so the FIFO keeps moving) and
// the handle is closed. A cancellation that happens before the grant always wins: the grant
// and the context's end are compared once, after the wait. Any failed Acquire leaves the
// handle holding nothing, closed: a later Acquire returns ErrClosed.
//
// So a context with a deadline does not make a wait that may time out and go on. To wait a
// bounded time and keep the handle, poll Test until it reports true (then Acquire returns
// at once) or the time is up, and do something else meanwhile; the request keeps its place
// in the FIFO. After a failed Acquire, a task that still needs the location places a new
// request (ReadRequest, WriteRequest): it goes to the tail of the FIFO, behind every
// request queued meanwhile, outside the schedule's order.
func (h *Handle) Acquire(ctx context.Context) error { return h.h.Acquire(ctx) }

// Map returns the location's data between Acquire and Release, nil otherwise (an empty
// location maps to an empty, non-nil slice). The slice is valid until Release, or until a
// Resize, which returns the new one (Map returns it too): no slice may be used after
// Release, after a Resize that followed it, or after Run returns. The data of a read handle
// must not be modified.
//
// In a checked job (Config.Checked, on in tests) these mistakes fail the same way at every
// size and number of processes: a write through a read handle's data fails the Section
// with ErrReadOnlyData (the data is unchanged), a use of a slice from before Resize fails it
// with ErrStaleData, outside a Section either one fails the task, and a slice used after
// Run returns faults. Unchecked, a write through a read handle's data changes the owner's
// data when it is in the same process and only this process's copy otherwise, and a stale
// slice may still work, be lost or fault: do not rely on either.
func (h *Handle) Map() []byte { return h.h.Map() }

// Release ends the access started by Acquire; the next entry of the FIFO is granted. A write
// makes a new version of the data, which every later reader sees, in any process.
func (h *Handle) Release() error { return h.h.Release() }

// Section acquires the handle, calls fn with the mapped data, and releases it; it returns
// the first error of the three. When fn fails or panics in a write section, the data may be
// half written: it is never handed on, every request waiting on the location (and every
// later one) fails with an error naming the handle and fn's error, and the handle is closed.
// The data is fn's until it returns, under Map's rules: read-only for a read handle, and
// replaced by what Resize returns; in a checked job a misuse is fn's error (ErrReadOnlyData,
// ErrStaleData), naming the task, the location and the position.
func (h *Handle) Section(ctx context.Context, fn func(data []byte) error) error {
	return h.h.Section(ctx, fn)
}

// Test reports, without waiting for the FIFO to move, whether the handle's request is
// granted, so that Acquire would return at once. It sees every grant decided before the
// caller's last synchronisation with the location's FIFO: its own acquire or release of a
// handle on it, or a release by another task that happens before. So right after an
// Acquire returns, Test reports true for every other request of the task granted in the same
// read group, whether the location is in this process or another.
func (h *Handle) Test() bool { return h.h.Test() }

// Resize changes the size of the location's data while the handle holds a write grant,
// keeping the common prefix and zero-filling the rest, and returns the new data (Map returns
// it too). Every later access, in any process, sees the new size. The slice that Section's
// fn was given, and any earlier Map, is no longer valid: use the one Resize returns, or call
// Map again. Unchecked, a write through the old slice is lost (or, when the size fits in the
// old capacity, reaches the data); in a checked job it fails with ErrStaleData.
func (h *Handle) Resize(n int) ([]byte, error) { return h.h.Resize(n) }

// Request places a one-shot handle's request at the tail of its location's FIFO again, once
// it has released; inserts and requests place the first one. It never blocks.
func (h *Handle) Request() error { return h.h.Request() }

// Close releases the grant the handle holds and cancels the request it has queued; every
// later operation fails with ErrClosed. Closing a closed handle does nothing. A task's
// handles are closed when its function returns.
func (h *Handle) Close() error { return h.h.Close() }

// Mode returns whether the handle reads or writes.
func (h *Handle) Mode() Mode { return modeOf(h.h.Mode()) }
