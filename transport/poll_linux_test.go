package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// onPoller reports whether the calling goroutine runs inside Poller.Poll.
func onPoller() bool {
	buf := make([]byte, 16<<10)
	return bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("transport.(*Poller).Poll("))
}

// A goroutine that polls reads the messages it waits for itself when they come whole in
// one frame of less than 64 KiB, and leaves the others to the connection's reader: every
// message arrives, once, in order.
func TestPollReadsSmallMessagesOnTheCaller(t *testing.T) {
	const n = 400
	var got atomic.Int64 // messages delivered
	var polled, mediumPolled, largePolled atomic.Int64
	var mu sync.Mutex
	var errs []string
	rec := newRecorder()
	rec.onRecv = func(from int, h *Header, p []byte) {
		i := int64(h.Seq)
		if want := got.Load(); i != want {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("message %d arrived as number %d", i, want))
			mu.Unlock()
		}
		if onPoller() {
			polled.Add(1)
			switch {
			case len(p) >= 1<<16:
				largePolled.Add(1)
			case len(p) > 125:
				mediumPolled.Add(1)
			}
		}
		got.Add(1)
	}
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Spin = time.Second
		if rank == 1 {
			c.Handler = rec
		}
	})
	poller := meshes[1].Poller()
	for i := range n {
		size := 8
		switch i % 4 {
		case 2:
			size = 2000 // a frame with a 16-bit length
		case 3:
			size = 70000 // more than a frame with a 16-bit length holds
		}
		if err := meshes[0].Send(1, Requester, Header{Type: TypeUser, Seq: uint64(i)}, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		want := int64(i + 1)
		poller.Poll(func() bool { return got.Load() >= want }, nil)
		if got.Load() < want {
			t.Fatalf("Poll returned before message %d arrived", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	if polled.Load() == 0 || mediumPolled.Load() == 0 {
		t.Errorf("of %d messages, %d were read by the polling goroutine, %d of 2000 bytes; want some of both", n, polled.Load(), mediumPolled.Load())
	}
	if largePolled.Load() != 0 {
		t.Errorf("%d messages of 70000 bytes were read by the polling goroutine", largePolled.Load())
	}
}

// Goroutines that poll at the same time as the reader, while the peer streams messages of
// every size, take nothing out of order and lose nothing.
func TestPollersAndReaderKeepTheOrder(t *testing.T) {
	const n = 20000
	var next atomic.Uint64
	var bad atomic.Int64
	rec := newRecorder()
	rec.onRecv = func(from int, h *Header, p []byte) {
		if !next.CompareAndSwap(h.Seq, h.Seq+1) || (len(p) >= 8 && binary.LittleEndian.Uint64(p) != h.Seq) {
			bad.Add(1)
		}
	}
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Spin = time.Millisecond
		if rank == 1 {
			c.Handler = rec
		}
	})
	stop := make(chan struct{})
	wait := startPollers(3, meshes[1], func() bool { return next.Load() == n }, stop)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		p := make([]byte, 8+rng.IntN(300))
		binary.LittleEndian.PutUint64(p, uint64(i))
		if err := meshes[0].Send(1, Requester, Header{Type: TypeUser, Seq: uint64(i)}, p); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); next.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wait()
	if got := next.Load(); got != n || bad.Load() != 0 {
		t.Errorf("%d of %d messages delivered in order, %d out of order or corrupted", got, n, bad.Load())
	}
}

// Close waits for a goroutine that is reading a message in Poll before it unmaps the
// shared memory, and Poll reads nothing afterwards.
func TestCloseWhilePolling(t *testing.T) {
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) { c.Spin = time.Second })
	stop := make(chan struct{})
	wait := startPollers(2, meshes[1], func() bool { return false }, stop)
	for i := range 200 {
		if err := meshes[0].Send(1, Requester, Header{Type: TypeUser, Seq: uint64(i)}, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	closeAll(meshes)
	time.Sleep(10 * time.Millisecond) // the pollers go on after Close
	close(stop)
	wait()
}

// startPollers starts n goroutines that poll m with done, each with a Poller of its own,
// again and again until stop is closed, and returns a function that waits for them.
func startPollers(n int, m *Mesh, done func() bool, stop chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := m.Poller()
			for !isClosed(stop) {
				p.Poll(done, stop)
				runtime.Gosched()
			}
		}()
	}
	return wg.Wait
}

// On a host its processes oversubscribe, the readers sleep at once and a peer's writer
// leaves the wake-up of a sleeping reader to the task that polls: a message that comes
// after the one the task waited for, as the task stops polling, is still delivered (the
// task reads it, or wakes the reader for it), pair after pair, small messages and ones
// only the reader reads.
func TestMessageAfterThePolledOneIsDelivered(t *testing.T) {
	const pairs = 300
	var got atomic.Uint64
	arrived := make(chan struct{}, 2*pairs) // a message was delivered
	rec := newRecorder()
	rec.onRecv = func(from int, h *Header, p []byte) {
		got.Store(h.Seq + 1)
		arrived <- struct{}{}
	}
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Spin = time.Second
		c.Oversubscribed = true
		c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour // no heartbeat wakes the reader
		if rank == 1 {
			c.Handler = rec
		}
	})
	poller := meshes[1].Poller()
	for i := range pairs {
		first, second := uint64(2*i), uint64(2*i+1)
		for k, seq := range []uint64{first, second} {
			size := 8
			if (i+k)%3 == 0 {
				size = 70000 // the reader's to read
			}
			if err := meshes[0].Send(1, Requester, Header{Type: TypeUser, Seq: seq}, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		}
		poller.Poll(func() bool { return got.Load() > first }, nil)
		for got.Load() <= second {
			select {
			case <-arrived:
			case <-time.After(5 * time.Second):
				t.Fatalf("message %d not delivered 5s after Poll returned with message %d", second, first)
			}
		}
	}
}

// On a crowded host a task polls only the connections that deliver (watchList): once a
// peer has sent nothing for a while, the task no longer looks at its ring nor tells its
// writer it polls, and that peer's next message still arrives, through the reader it
// wakes, while the task polls for another's; the connection is watched again after it.
func TestQuietPeerIsLeftToItsReader(t *testing.T) {
	var got [3]atomic.Int32
	rec := newRecorder()
	rec.onRecv = func(from int, h *Header, p []byte) { got[from].Add(1) }
	meshes, _ := startMeshes(t, 3, func(rank int, c *Config) {
		c.Spin, c.Oversubscribed = time.Hour, true
		c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour // only the test's messages
		if rank == 0 {
			c.Handler = rec
		}
	})
	poller := meshes[0].Poller()
	fromOne := func() { // a message from rank 1, and the task's wait for it
		want := got[1].Load() + 1
		if err := meshes[1].SendNow(0, Requester, Header{Type: TypeUser}, []byte("busy")); err != nil {
			t.Fatal(err)
		}
		poller.Poll(func() bool { return got[1].Load() >= want }, nil)
		if got[1].Load() < want {
			t.Fatal("Poll returned before rank 1's message came")
		}
	}
	watchesTwo := func() bool {
		return slices.ContainsFunc(poller.watch.conns, func(c *conn) bool { return c.peer == 2 })
	}
	for range (watchKeep + 1) * watchEvery {
		fromOne()
	}
	if watchesTwo() {
		t.Fatal("rank 2, silent, is still watched")
	}
	quiet := meshes[0].peers[2].conns[Owner].Load().shm.in.h // rank 2's Requester messages
	deadline, looks := time.Now().Add(5*time.Second), 0
	poller.Poll(func() bool {
		if looks++; looks == 2 { // the first look found nothing: the task polls
			if quiet.polling.Load() != 0 {
				t.Error("the task told rank 2's writer that it polls its ring")
			}
			if err := meshes[2].SendNow(0, Requester, Header{Type: TypeUser}, []byte("quiet")); err != nil {
				t.Error(err)
			}
		}
		return got[2].Load() == 1 || time.Now().After(deadline)
	}, nil)
	if got[2].Load() != 1 {
		t.Fatal("rank 2's message not delivered within 5s")
	}
	for range watchEvery {
		fromOne()
	}
	if !watchesTwo() {
		t.Error("rank 2 not watched again after its message")
	}
}

// A Poller seats one goroutine: a second one's Poll returns at once, without polling.
func TestPollerSeatsOneGoroutine(t *testing.T) {
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Spin, c.Oversubscribed = time.Hour, true
	})
	poller := meshes[0].Poller()
	stop, polling := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go poller.Poll(func() bool { once.Do(func() { close(polling) }); return isClosed(stop) }, nil)
	<-polling
	looks := 0
	poller.Poll(func() bool { looks++; return looks == 3 }, nil)
	close(stop)
	if looks != 0 {
		t.Errorf("a second goroutine's Poll looked %d times while the first polled, want 0", looks)
	}
}
