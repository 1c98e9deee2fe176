package tick

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// clock is the clockFunc of a timerfd that expires every period; stop closes it. It is a
// time.Ticker's when the system gives no timerfd (out of descriptors, for one).
func clock(ctx context.Context, period time.Duration) (tick func() bool, stop func()) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return tickerClock(ctx, period)
	}
	interval := unix.NsecToTimespec(period.Nanoseconds())
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: interval, Value: interval}, nil); err != nil {
		unix.Close(fd)
		return tickerClock(ctx, period)
	}
	// The descriptor is non-blocking: a read of f waits in the network poller, and closing
	// f ends it.
	f := os.NewFile(uintptr(fd), "timerfd")
	unwatch := context.AfterFunc(ctx, func() { f.Close() })
	var expiries [8]byte
	tick = func() bool {
		_, err := f.Read(expiries[:])
		return err == nil && ctx.Err() == nil
	}
	return tick, func() {
		unwatch()
		f.Close()
	}
}
