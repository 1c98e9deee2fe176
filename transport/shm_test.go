package transport

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/hostcpu"
)

// A reader or a task polls for spin, and past it, up to maxIdleSpin, only while the process
// is idle and no connection of the mesh waits on its socket; it yields its goroutine between
// two looks.
func TestReaderGroupPollOn(t *testing.T) {
	idle := func() bool { return true }
	busy := func() bool { return false }
	spin := 50 * time.Microsecond
	for _, c := range []struct {
		name            string
		spin            time.Duration
		idle            func() bool
		sockets, asleep int32
		polled          time.Duration
		want            pollMode
	}{
		{"within spin", spin, busy, 0, 0, spin - 1, pollYield},
		{"within spin, a connection on its socket", spin, busy, 1, 0, 0, pollYield},
		{"past spin, busy", spin, busy, 0, 0, spin, pollStop},
		{"past spin, no Idle", spin, nil, 0, 0, spin, pollStop},
		{"past spin, idle", spin, idle, 0, 0, spin, pollYield},
		{"past spin, idle, a connection on its socket", spin, idle, 1, 0, spin, pollStop},
		{"past spin, idle, a reader asleep", spin, idle, 0, 1, spin, pollStop},
		{"past the idle bound", spin, idle, 0, 0, maxIdleSpin, pollStop},
		{"no polling", 0, idle, 0, 0, 0, pollStop},
	} {
		g := readerGroup{spin: c.spin, idle: c.idle}
		g.crowd.runnable = quietHost
		g.sockets.Store(c.sockets)
		g.asleep.Store(c.asleep)
		for _, task := range []bool{false, true} {
			if got := g.pollOn(c.polled, time.Now(), task); got != c.want {
				t.Errorf("%s (task %v): pollOn(%v) = %v, want %v", c.name, task, c.polled, got, c.want)
			}
		}
	}
}

// While the host has more runnable threads than cores, whoever they are, a task yields its
// thread's core at every look, and only for spin, not the longer polling of an idle process,
// and a reader does not poll; either change takes two samples running that agree, so that a
// thread or two waking up for a moment changes nothing.
func TestReaderGroupYieldsTheCoreOnACrowdedHost(t *testing.T) {
	crowded, alone := crowdThreshold()+1, hostcpu.Online()+1 // alone: a job, and a thread of the runtime waking up
	runnable := crowded
	spin := time.Millisecond
	g := readerGroup{spin: spin, idle: func() bool { return true }}
	g.crowd.runnable = func() int { return runnable }
	sample := func(n int, polled time.Duration) pollMode {
		runnable = n
		g.crowd.next.Store(0) // the next sample is due
		return g.pollOn(polled, time.Now(), true)
	}
	for i, c := range []struct {
		runnable int
		mode     pollMode
	}{
		{crowded, pollYield}, // one sample says crowded: a moment
		{alone, pollYield},
		{crowded, pollYield},
		{crowded, pollYieldThread}, // two say crowded
		{alone, pollYieldThread},   // one sample says free: the readers' own threads may be the crowd
		{crowded, pollYieldThread},
		{alone, pollYieldThread},
		{alone, pollYield}, // two say free
	} {
		if got := sample(c.runnable, 0); got != c.mode {
			t.Fatalf("sample %d (%d runnable threads on %d cores): pollOn = %v, want %v", i+1, c.runnable, hostcpu.Online(), got, c.mode)
		}
	}
	if got := g.pollOn(0, time.Now(), true); got != pollYield {
		t.Fatalf("pollOn changed between two samples: %v", got)
	}
	sample(crowded, 0)
	if got := sample(crowded, spin); got != pollStop {
		t.Fatalf("crowded, past spin in an idle process: pollOn = %v, want %v (no polling past spin)", got, pollStop)
	}
	if got := g.pollOn(0, time.Now(), false); got != pollStop {
		t.Fatalf("crowded: a reader's pollOn = %v, want %v (only tasks poll)", got, pollStop)
	}
}

// A job that oversubscribes its host polls as on a crowded one, whatever the load: a task
// within spin, yielding its core at every look, and no longer, idle or not; a reader not at
// all.
func TestReaderGroupOversubscribed(t *testing.T) {
	spin := 50 * time.Microsecond
	m, err := New(Config{Rank: 0, Size: 1, Spin: spin, Idle: func() bool { return true }, Oversubscribed: true})
	if err != nil {
		t.Fatal(err)
	}
	g := &m.readers
	g.crowd.runnable = quietHost // a quiet host, which the job itself oversubscribes
	for _, c := range []struct {
		polled time.Duration
		want   pollMode
		task   bool
	}{{0, pollYieldThread, true}, {spin - 1, pollYieldThread, true}, {spin, pollStop, true}, {0, pollStop, false}, {spin - 1, pollStop, false}} {
		if got := g.pollOn(c.polled, time.Now(), c.task); got != c.want {
			t.Errorf("task %v: pollOn(%v) = %v, want %v", c.task, c.polled, got, c.want)
		}
	}
}

// A job whose processes have more schedulers than the host has cores, though not more
// processes (a user's GOMAXPROCS), leaves the polling to its tasks: a reader sleeps at once,
// and a task polls within spin, giving its core away at every look unless it is the only
// task of an idle process that polls: the job's polling tasks then number at most its
// processes, no more than the cores, whatever the host's load says (which counts the
// runtime's own spinning threads).
func TestReaderGroupManySchedulers(t *testing.T) {
	spin := 50 * time.Microsecond
	idle := true
	m, err := New(Config{Rank: 0, Size: 1, Spin: spin, Idle: func() bool { return idle }, ManySchedulers: true})
	if err != nil {
		t.Fatal(err)
	}
	g := &m.readers
	g.crowd.runnable = func() int { return crowdThreshold() + 1 }
	for _, c := range []struct {
		name    string
		idle    bool
		pollers int32
		polled  time.Duration
		task    bool
		want    pollMode
	}{
		{"the only task polling", true, 1, 0, true, pollYield},
		{"the only task polling, near spin", true, 1, spin - 1, true, pollYield},
		{"the only task polling, past spin", true, 1, spin, true, pollStop},
		{"two tasks polling", true, 2, 0, true, pollYieldThread},
		{"a task computing", false, 1, 0, true, pollYieldThread},
		{"a reader", true, 0, 0, false, pollStop},
	} {
		idle = c.idle
		g.pollers.Store(c.pollers)
		for range 3 { // samples, which say crowded
			g.crowd.next.Store(0)
			g.pollOn(c.polled, time.Now(), c.task)
		}
		if got := g.pollOn(c.polled, time.Now(), c.task); got != c.want {
			t.Errorf("%s: pollOn(%v) = %v, want %v", c.name, c.polled, got, c.want)
		}
	}
	if !g.sleepAtOnce() {
		t.Error("with many schedulers, the readers do not sleep at once")
	}
}

// hostRunnable reads the kernel's count of runnable threads, this one at least, at every
// sample.
func TestHostRunnable(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc/loadavg here:", err)
	}
	for i := range 3 {
		if n := hostRunnable(); n < 1 {
			t.Fatalf("sample %d: hostRunnable() = %d while this thread runs", i, n)
		}
	}
}

func BenchmarkHostRunnable(b *testing.B) {
	for b.Loop() {
		hostRunnable()
	}
}

// quietHost is a host whose cores are free, whatever this machine's load: tests of polling
// readers use it, since their fake sockets bring no wake-up to a reader that sleeps.
func quietHost() int { return 1 }

// pollingGroup returns readers that poll for spin on a quiet host.
func pollingGroup(spin time.Duration) *readerGroup {
	g := &readerGroup{spin: spin}
	g.crowd.runnable = quietHost
	return g
}

// A task polls many looks between two yields only in an idle process, all of whose
// connections go through shared memory (their readers may sleep: the task reads their
// rings), on a host that is neither crowded nor oversubscribed; on a crowded or
// oversubscribed one, it yields after every look.
func TestReaderGroupLooksPerYield(t *testing.T) {
	idle := func() bool { return true }
	busy := func() bool { return false }
	for _, c := range []struct {
		name                    string
		idle                    func() bool
		sockets, asleep         int32
		crowded, oversubscribed bool
		want                    int
	}{
		{"idle", idle, 0, 0, false, false, idleBusyLooks},
		{"busy", busy, 0, 0, false, false, busyLooks},
		{"no Idle", nil, 0, 0, false, false, busyLooks},
		{"a connection on its socket", idle, 1, 0, false, false, busyLooks},
		{"a ring's reader asleep", idle, 0, 1, false, false, idleBusyLooks},
		{"crowded", idle, 0, 0, true, false, 1},
		{"oversubscribed", idle, 0, 0, false, true, 1},
	} {
		g := readerGroup{spin: time.Millisecond, idle: c.idle}
		g.sockets.Store(c.sockets)
		g.asleep.Store(c.asleep)
		g.crowd.crowded.Store(c.crowded)
		if c.oversubscribed {
			g.crowd.pin()
		}
		if got := g.looksPerYield(); got != c.want {
			t.Errorf("%s: %d looks per yield, want %d", c.name, got, c.want)
		}
	}
}

// A waiting task yields its processor to the process's other goroutines between two looks
// only where the process has one processor: with more, the yield would wake an idle
// processor's thread at every look. A reader always yields: its messages ready goroutines.
func TestPollerYieldsItsProcessorOnlyWhenAlone(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	g := readerGroup{spin: time.Second}
	g.crowd.runnable = quietHost
	for _, c := range []struct {
		procs int
		task  bool
		want  bool
	}{{1, true, true}, {2, true, false}, {1, false, true}, {2, false, true}} {
		runtime.GOMAXPROCS(c.procs)
		p := poller{task: c.task}
		if !p.next(&g) {
			t.Fatalf("GOMAXPROCS %d, task %v: stopped polling within its spin", c.procs, c.task)
		}
		if p.yields != c.want {
			t.Errorf("GOMAXPROCS %d, task %v: yields %v, want %v", c.procs, c.task, p.yields, c.want)
		}
	}
}
