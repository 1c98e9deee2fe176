// Package tick calls a function periodically without a runtime timer, for the goroutines
// that watch a job while its tasks run (the deadlock watch, the checkpointer).
//
// A goroutine that waits on a runtime timer (time.Ticker, time.Sleep) puts the timer in the
// timer heap of a processor (a P), and while a processor's heap holds a timer, every
// goroutine switch on that processor reads the clock to see whether the timer is due. Tasks
// that hand a location to each other switch goroutines at every hand-off, and on Linux that
// clock read was a tenth of a local hand-off (go test -bench Handoff ./orwl). So on Linux the
// tick is a timerfd read through the network poller, which the scheduler looks at only
// when a processor has nothing else to run; elsewhere, or when the system gives no timerfd,
// it is a time.Ticker.
package tick

import (
	"context"
	"time"
)

// Every calls fn every period until ctx is done or fn returns false, and returns then. The
// first call comes one period after Every is called; a tick that comes while fn runs is
// dropped, as time.Ticker drops it. period must be positive.
func Every(ctx context.Context, period time.Duration, fn func() bool) {
	every(clock, ctx, period, fn)
}

// clockFunc starts a clock that ticks every period: tick blocks until the next tick (true)
// or until ctx is done (false), and stop releases what the clock holds.
type clockFunc func(ctx context.Context, period time.Duration) (tick func() bool, stop func())

// every is Every on clock c.
func every(c clockFunc, ctx context.Context, period time.Duration, fn func() bool) {
	tick, stop := c(ctx, period)
	defer stop()
	for tick() && fn() {
	}
}

// tickerClock is the clockFunc of a time.Ticker.
func tickerClock(ctx context.Context, period time.Duration) (tick func() bool, stop func()) {
	t := time.NewTicker(period)
	tick = func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	return tick, t.Stop
}
