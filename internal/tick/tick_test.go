package tick

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// clocks are the clocks Every may run on here: the system's, and the fallback.
var clocks = map[string]clockFunc{
	"system": clock,
	"ticker": tickerClock,
}

// TestEveryTicksUntilFnSaysStop: fn is called about every period, and Every returns when fn
// returns false; nothing is left running.
func TestEveryTicksUntilFnSaysStop(t *testing.T) {
	for name, c := range clocks {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const period, calls = 5 * time.Millisecond, 5
			n := 0
			start := time.Now()
			every(c, context.Background(), period, func() bool {
				n++
				return n < calls
			})
			if n != calls {
				t.Fatalf("fn called %d times, want %d", n, calls)
			}
			if d := time.Since(start); d < calls*period {
				t.Fatalf("%d calls took %v, less than %d periods of %v", calls, d, calls, period)
			}
		})
	}
}

// TestEveryEndsWithTheContext: a context that ends between two ticks ends Every at once,
// without a call of fn, and a context done before Every starts calls fn never.
func TestEveryEndsWithTheContext(t *testing.T) {
	for name, c := range clocks {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			every(c, ctx, time.Hour, func() bool {
				t.Error("fn called, no tick was due")
				return true
			})
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("Every returned %v after its context ended, want at once", d)
			}
			every(c, ctx, time.Millisecond, func() bool {
				t.Error("fn called with the context done")
				return true
			})
		})
	}
}

// TestEvery: the exported function ticks and stops like the clock it runs on.
func TestEvery(t *testing.T) {
	n := 0
	Every(context.Background(), time.Millisecond, func() bool {
		n++
		return n < 3
	})
	if n != 3 {
		t.Fatalf("fn called %d times, want 3", n)
	}
}
