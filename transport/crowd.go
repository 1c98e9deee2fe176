package transport

import (
	"bytes"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/internal/hostcpu"
)

// crowdProbe tells polling readers and tasks whether the host is oversubscribed: more
// runnable threads than cores can run, counting every program's, not only this job's. A
// thread that polls then takes a core from a thread with work to do (perhaps the peer whose
// message it waits for), so only a task that waits for a message polls, giving its core to
// the host's other threads at every look, for Config.Spin only, and readers sleep at once
// (readerGroup.pollOn), as an MPI library that knows its cores are oversubscribed polls
// with a yield; a task sleeping at once instead would cost every message a wake-up. The
// count of a job alone on its cores (a polling or computing thread per core) often has a
// thread or two more, runtime and kernel threads waking up: the threshold leaves them a
// margin (crowdThreshold), which two jobs polling on the same cores exceed. The host changes
// from free to crowded, or back, only when two samples running agree: a thread or two more
// for a moment (a sample in 20 on a 2-core host running one job) is no crowd, while two
// jobs polling exceed the threshold whenever their readers poll. A polling reader takes a
// sample at most every crowdSample; the zero value samples the kernel's count
// (/proc/loadavg), which a host without it never exceeds.
type crowdProbe struct {
	runnable func() int   // the host's runnable threads; nil: hostRunnable
	next     atomic.Int64 // when the next sample is due, Unix ns
	over     atomic.Bool  // the latest sample exceeded the threshold
	crowded  atomic.Bool
}

// crowdSample is how often a polling reader looks at the host's load: a look costs a few
// microseconds, a thousandth of the time.
const crowdSample = 2 * time.Millisecond

// Crowded reports whether the host is crowded at time now, taking a new sample when one is
// due.
func (p *crowdProbe) Crowded(now time.Time) bool {
	t := now.UnixNano()
	if next := p.next.Load(); t >= next && p.next.CompareAndSwap(next, t+int64(crowdSample)) {
		runnable := p.runnable
		if runnable == nil {
			runnable = hostRunnable
		}
		if over := runnable() > crowdThreshold(); p.over.Swap(over) == over {
			p.crowded.Store(over)
		}
	}
	return p.crowded.Load()
}

// pin makes the host crowded for good, with no more samples: a job whose own processes
// oversubscribe it (Config.Oversubscribed).
func (p *crowdProbe) pin() {
	p.next.Store(math.MaxInt64)
	p.crowded.Store(true)
}

// crowdThreshold is the most runnable threads a host holds before it counts as crowded: its
// cores plus a margin of a quarter of them, one at least. Its cores are all the host's, as
// /proc/loadavg counts their threads, not only those this process may run on (one, where
// a launcher bound each process to a core).
func crowdThreshold() int {
	n := hostcpu.Online()
	return n + max(1, n/4)
}

// hostRunnable returns the number of runnable threads of the host, the reader's included:
// the numerator of the fourth field of /proc/loadavg ("0.50 0.40 0.30 3/456 789"), or 0 when
// it cannot be read.
func hostRunnable() int {
	var buf [128]byte
	f := bytes.Fields(buf[:readLoadavg(buf[:])])
	if len(f) < 4 {
		return 0
	}
	running, _, _ := bytes.Cut(f[3], []byte("/"))
	n, _ := strconv.Atoi(string(running))
	return n
}
