//go:build !linux

package tick

import (
	"context"
	"time"
)

// clock is the clockFunc of a time.Ticker here: only Linux has a timerfd.
func clock(ctx context.Context, period time.Duration) (tick func() bool, stop func()) {
	return tickerClock(ctx, period)
}
