package tick

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestEveryClosesItsTimerfd: however Every ends, the descriptor of its timerfd is closed
// when it returns.
func TestEveryClosesItsTimerfd(t *testing.T) {
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		return len(fds)
	}
	before := open()
	Every(context.Background(), time.Millisecond, func() bool { return false })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	Every(ctx, time.Hour, func() bool { return true })
	if after := open(); after != before {
		t.Fatalf("%d descriptors open before Every, %d after", before, after)
	}
}
