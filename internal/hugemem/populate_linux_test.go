package hugemem

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// fillChildEnv asks the test binary to run fillWithHeartbeat in itself and print its
// figures (see TestFillLetsHeartbeatsThrough).
const fillChildEnv = "HUGEMEM_TEST_FILL_CHILD"

func init() {
	if os.Getenv(fillChildEnv) != "" {
		took, worst := fillWithHeartbeat(16 * fillStep)
		fmt.Println(int64(took), int64(worst))
		os.Exit(0)
	}
}

// fillWithHeartbeat fills a fresh buffer of size bytes while a goroutine ticks every 10ms
// and allocates, as a heartbeat does; it returns how long fill took and the longest gap
// between two ticks meanwhile.
func fillWithHeartbeat(size uintptr) (took, worst time.Duration) {
	p, length := mapHuge(size, "")
	if p == nil {
		return 0, 0
	}
	defer unmap(p, length)
	done := make(chan struct{})
	longest := make(chan time.Duration)
	ticking := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var worst time.Duration
		var keep [][]byte // a growing heap, which the runtime maps as it grows
		last := time.Now()
		for n := 0; ; n++ {
			if n == 5 { // the heartbeat is under way
				close(ticking)
			}
			select {
			case <-done: // the gap since the last tick counts too
				longest <- max(worst, time.Since(last))
				runtime.KeepAlive(keep)
				return
			case now := <-tick.C:
				worst = max(worst, now.Sub(last))
				last = now
				keep = append(keep, make([]byte, 1<<20))
			}
		}
	}()
	<-ticking
	start := time.Now()
	fill(p, size)
	took = time.Since(start)
	close(done)
	if b := unsafe.Slice((*byte)(p), size); b[size-1] != 0 {
		panic("fill: a byte is not zero")
	}
	return took, <-longest
}

// TestFillLetsHeartbeatsThrough: while fill faults in a large buffer, a goroutine of a
// fresh process with one scheduler (GOMAXPROCS 1: a process of two on a host of two cores)
// that ticks every 10ms and allocates, as a heartbeat does, keeps ticking. The kernel holds
// the process's memory map during a MADV_POPULATE_WRITE, and the Go runtime maps memory
// (its heap growing, a thread's stack) with its scheduler held: a single call for 2 GiB
// stopped a process's heartbeats for over 3s, longer than the peer timeout. fill's bounded
// steps keep every stop to about one step.
func TestFillLetsHeartbeatsThrough(t *testing.T) {
	supportsPopulate(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fillChildEnv+"=1", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	var took, worst time.Duration
	if _, serr := fmt.Sscan(strings.TrimSpace(string(out)), &took, &worst); err != nil || serr != nil {
		t.Fatalf("the child: %v %v: %s", err, serr, out)
	}
	if took == 0 {
		t.Skip("the system refuses a mapping of 1 GiB")
	}
	t.Logf("filling %d MiB took %v; the longest gap between two ticks of 10ms meanwhile %v", 16*fillStep>>20, took, worst)
	if worst > took/2 && worst > 100*time.Millisecond {
		t.Fatalf("a tick of 10ms waited %v while filling %d MiB took %v: fill holds the process up for more than a step of %d MiB",
			worst, 16*fillStep>>20, took, fillStep>>20)
	}
}
