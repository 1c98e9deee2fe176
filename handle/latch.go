package handle

import (
	"context"
	"sync/atomic"

	"github.com/orwl-go/orwl/internal/release"
)

// Latch is one request's grant as its waiter sees it, whoever grants it (a local FIFO or
// another process). It is Pending from Start until exactly one of: the queue Grants it, the
// queue Fails it, or its waiter Cancels it (latch_end.go); a cancellation before the grant
// wins, and Grant then returns false. Grant and Fail may be called from any goroutine;
// Start, Wait and Cancel only by the waiter, one at a time.
type Latch struct {
	state atomic.Uint32 // a LatchState, or parked
	err   atomic.Pointer[error]
	wake  chan struct{} // the parked waiter's channel (see Wait)
}

// LatchState is the stage of a Latch.
type LatchState uint32

// The stages of a Latch.
const (
	LatchIdle      LatchState = iota // no request, or Start was never called
	LatchPending                     // requested, waiting for its grant
	LatchGranted                     // the grant arrived; the holder may access the data
	LatchFailed                      // the queue failed the request; Err says why
	LatchCancelled                   // the waiter gave the request up
)

// parked is a pending latch whose Wait blocks on its waiter's channel (State says
// LatchPending): whoever settles it swaps it away, then sends a token.
const parked = 5

// Start makes l Pending for a new request. The previous request's outcome is forgotten.
func (l *Latch) Start() {
	if l.err.Load() != nil {
		l.err.Store(nil)
	}
	release.Uint32(&l.state, uint32(LatchPending)) // published with the request, under the queue's lock
}

// State returns the stage of l.
func (l *Latch) State() LatchState {
	if s := l.state.Load(); s != parked {
		return LatchState(s)
	}
	return LatchPending
}

// Granted reports, without blocking, whether l is granted.
func (l *Latch) Granted() bool { return l.state.Load() == uint32(LatchGranted) }

// Grant grants a pending l and wakes its waiter. It returns false, changing nothing, when l
// is not pending: cancelled (the caller must then give the grant back), failed or idle.
func (l *Latch) Grant() bool { return l.settle(LatchGranted, nil) }

// settle moves a pending l to s, with err when not nil, and wakes its waiter.
func (l *Latch) settle(s LatchState, err *error) bool {
	for {
		old := l.state.Load()
		if old != uint32(LatchPending) && old != parked {
			return false
		}
		if err != nil {
			l.err.Store(err)
		}
		if l.state.CompareAndSwap(old, uint32(s)) {
			if old == parked {
				poke(l.wake)
			}
			return true
		}
	}
}

// poke puts a token in wake unless one is there: a token says "look again".
func poke(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// Wait blocks until l is granted (nil), failed (its error) or ctx is done (ctx.Err(); l is
// left pending or granted, for the caller to Cancel); ErrNotPending for an idle or cancelled
// l. wake, of capacity 1, is the waiter's channel, which may serve all its latches one wait
// at a time: a token left over only makes Wait look again. With ctxWakes, ctx's end puts a
// token in wake (Owner.Watch), and Wait blocks on wake alone.
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
			if !l.state.CompareAndSwap(s, parked) {
				continue
			}
		case parked: // woken by a token of an earlier wait: sleep again
		default:
			return ErrNotPending
		}
		if ctxWakes {
			<-wake
		} else {
			select {
			case <-wake:
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil && l.state.CompareAndSwap(parked, uint32(LatchPending)) {
			return err
		}
	}
}
