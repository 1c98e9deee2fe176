//go:build !linux

package tick

import (
	"context"
	"time"
)

// clock is a time.Ticker's here: only Linux has a timerfd.
func clock(ctx context.Context, period time.Duration) (tick func() bool, stop func()) {
	return tickerClock(ctx, period)
}
