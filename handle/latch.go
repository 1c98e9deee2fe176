package handle

import (
	"context"
	"errors"
	"sync/atomic"
)

// Latch is one request's grant as its waiter sees it. It is the single request life cycle
// of the runtime: a request of a local FIFO and a request sent to another process use the
// same Latch, and differ only in who grants it.
//
// A Latch is Pending from Start until exactly one of these happens: the queue Grants it, the
// queue Fails it with an error, or its waiter Cancels it. Wait blocks until it is granted or
// failed, or the context is done; it changes nothing. A cancellation that happens before the
// grant wins over it: Grant then returns false and the queue must treat the request as
// cancelled (release it as soon as it is granted); a Cancel that finds the latch granted
// reports it, and the caller gives the grant back.
//
// Concurrency: Grant and Fail may be called from any goroutine, at any time. Start, Wait and
// Cancel are called by the waiter, one at a time (its handle's goroutine).
type Latch struct {
	state atomic.Uint32 // a LatchState, or parked
	err   atomic.Pointer[error]
	wake  chan struct{} // the parked waiter's channel (see Wait)
}

// LatchState is the stage of a Latch.
type LatchState uint32

const (
	// LatchIdle: no request, or Start was never called.
	LatchIdle LatchState = iota
	// LatchPending: requested, waiting for its grant.
	LatchPending
	// LatchGranted: the grant arrived; the holder may access the data.
	LatchGranted
	// LatchFailed: the queue failed the request; Err says why.
	LatchFailed
	// LatchCancelled: the waiter gave the request up.
	LatchCancelled
)

// parked is the state of a pending latch whose Wait is blocked on its waiter's channel;
// State reports it as LatchPending. Grant and Fail swap it away and then send a token: one
// atomic decision, so a token is sent only when somebody waits.
const parked = 5

// ErrNotPending is returned by Wait on a latch that was never started or was cancelled.
var ErrNotPending = errors.New("request is not pending")

// String returns the lower-case name of the state.
func (s LatchState) String() string {
	switch s {
	case LatchIdle:
		return "idle"
	case LatchPending:
		return "pending"
	case LatchGranted:
		return "granted"
	case LatchFailed:
		return "failed"
	case LatchCancelled:
		return "cancelled"
	}
	return "invalid latch state"
}

// Start makes l Pending for a new request. The previous request's outcome is forgotten.
func (l *Latch) Start() {
	if l.err.Load() != nil {
		l.err.Store(nil)
	}
	l.state.Store(uint32(LatchPending))
}

// State returns the stage of l.
func (l *Latch) State() LatchState {
	if s := l.state.Load(); s != parked {
		return LatchState(s)
	}
	return LatchPending
}

// Parked reports whether l's waiter is blocked in Wait now, for an observer that must know
// it without the waiter's help (deadlock detection).
func (l *Latch) Parked() bool { return l.state.Load() == parked }

// Granted reports, without blocking, whether l is granted.
func (l *Latch) Granted() bool { return l.state.Load() == uint32(LatchGranted) }

// Err returns why l failed, or nil.
func (l *Latch) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Grant grants a pending l and wakes its waiter. It returns false, changing nothing, when l
// is not pending: cancelled (the caller must then give the grant back), failed or idle.
func (l *Latch) Grant() bool { return l.settle(LatchGranted) }

// Fail fails a pending l with err (not nil) and wakes its waiter; Wait then returns err. It
// returns false, changing nothing, when l is not pending.
func (l *Latch) Fail(err error) bool {
	for {
		s := l.state.Load()
		if s != uint32(LatchPending) && s != parked {
			return false
		}
		l.err.Store(&err)
		if l.state.CompareAndSwap(s, uint32(LatchFailed)) {
			if s == parked {
				poke(l.wake)
			}
			return true
		}
	}
}

// settle moves a pending l to s and wakes its waiter.
func (l *Latch) settle(s LatchState) bool {
	for {
		old := l.state.Load()
		if old != uint32(LatchPending) && old != parked {
			return false
		}
		if l.state.CompareAndSwap(old, uint32(s)) {
			if old == parked {
				poke(l.wake)
			}
			return true
		}
	}
}

// poke puts a token in a waiter's channel unless one is there already: a token only says
// "look again", so one is as good as two.
func poke(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// Cancel gives the request up: a pending l becomes cancelled (a later Grant returns false),
// and a granted one too, in which case Cancel returns true and the caller must give the
// grant back. A failed, cancelled or idle l is left as it is.
func (l *Latch) Cancel() (held bool) {
	for {
		s := l.state.Load()
		switch s {
		case uint32(LatchPending), uint32(LatchGranted):
			if l.state.CompareAndSwap(s, uint32(LatchCancelled)) {
				return s == uint32(LatchGranted)
			}
		default: // never parked: Cancel and Wait are not called at the same time
			return false
		}
	}
}

// Wait blocks until l is granted (nil), failed (its error) or ctx is done (ctx.Err(); the
// latch is then left pending or granted, for the caller to Cancel). It returns ErrNotPending
// for a latch that is idle or cancelled.
//
// wake is the waiter's channel, of capacity 1: the grant's token goes there. A waiter may use
// one channel for all its latches, one wait at a time; a token left over from an earlier
// wait only makes Wait look again. When ctxWakes is true, ctx's end puts a token in wake too
// (Owner.Watch arranges it), and Wait blocks on wake alone; otherwise it also selects on
// ctx.Done().
func (l *Latch) Wait(ctx context.Context, wake chan struct{}, ctxWakes bool) error {
	for {
		switch s := l.state.Load(); s {
		case uint32(LatchGranted):
			return nil
		case uint32(LatchFailed):
			return l.Err()
		case uint32(LatchPending):
			if err := ctx.Err(); err != nil {
				return err
			}
			l.wake = wake
			if l.state.CompareAndSwap(s, parked) {
				return l.park(ctx, wake, ctxWakes)
			}
		default:
			return ErrNotPending
		}
	}
}

// park blocks the parked waiter until l is granted or failed, or ctx is done.
func (l *Latch) park(ctx context.Context, wake chan struct{}, ctxWakes bool) error {
	for {
		if ctxWakes {
			<-wake
		} else {
			select {
			case <-wake:
			case <-ctx.Done():
			}
		}
		switch l.state.Load() {
		case uint32(LatchGranted):
			return nil
		case uint32(LatchFailed):
			return l.Err()
		}
		if err := ctx.Err(); err != nil && l.state.CompareAndSwap(parked, uint32(LatchPending)) {
			return err
		}
		// A token of an earlier wait, or granted or failed just now: look again.
	}
}
