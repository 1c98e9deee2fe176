package orwl_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitExit waits, a minute at most, until the process of rank has ended, without reaping
// it (wait collects its status).
func (p *ringProcs) awaitExit(t *testing.T, rank int) {
	t.Helper()
	exited := make(chan error, 1)
	go func() {
		var info unix.Siginfo
		exited <- unix.Waitid(unix.P_PID, p.cmds[rank].Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("waiting for rank %d to end: %v", rank, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("rank %d did not end within a minute", rank)
	}
}
