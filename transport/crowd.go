package transport

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// crowdProbe tells polling readers whether the host is oversubscribed: more runnable threads
// than cores, counting every program's, not only this job's. A reader that polls then only
// takes a core from a thread with work to do, so readers sleep at once instead, and poll
// again once a sample finds the cores free. A polling reader takes a sample at most every
// crowdSample; the zero value samples the kernel's count (/proc/loadavg), which a host
// without it never exceeds.
type crowdProbe struct {
	runnable func() int   // the host's runnable threads; nil: hostRunnable
	next     atomic.Int64 // when the next sample is due, Unix ns
	crowded  atomic.Bool
}

// crowdSample is how often a polling reader looks at the host's load: a look costs a few
// microseconds, a thousandth of the time.
const crowdSample = 2 * time.Millisecond

// Crowded reports whether the latest sample found more runnable threads than cores, taking a
// new sample when one is due.
func (p *crowdProbe) Crowded() bool {
	now := time.Now().UnixNano()
	if next := p.next.Load(); now >= next && p.next.CompareAndSwap(next, now+int64(crowdSample)) {
		runnable := p.runnable
		if runnable == nil {
			runnable = hostRunnable
		}
		p.crowded.Store(runnable() > runtime.NumCPU())
	}
	return p.crowded.Load()
}

// hostRunnable returns the number of runnable threads of the host, the reader's included:
// the numerator of the fourth field of /proc/loadavg ("0.50 0.40 0.30 3/456 789"), or 0 when
// it cannot be read.
func hostRunnable() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0
	}
	running, _, _ := bytes.Cut(f[3], []byte("/"))
	n, _ := strconv.Atoi(string(running))
	return n
}
