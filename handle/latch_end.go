package handle

// This file holds a latch's ends other than its grant, apart from latch.go, which a grant
// reads: failed (Fail, Err) and cancelled (Cancel), and what observers read (Parked, String).

// Fail fails a pending l with err (not nil) and wakes its waiter; Wait then returns err. It
// returns false, changing nothing, when l is not pending.
func (l *Latch) Fail(err error) bool { return l.settle(LatchFailed, &err) }

// Err returns why l failed, or nil.
func (l *Latch) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
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

// Parked reports whether l's waiter is blocked in Wait now, for an observer that must know
// it without the waiter's help (deadlock detection).
func (l *Latch) Parked() bool { return l.state.Load() == parked }

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
