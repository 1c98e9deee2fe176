package transport

import (
	"bytes"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Processes of one host (here: meshes of one process) talk through shared memory, both
// ways, on both connections of every pair.
func TestSameHostUsesSharedMemory(t *testing.T) {
	meshes, _ := startMeshes(t, 3, nil)
	for _, m := range meshes {
		m.eachConn(func(c *conn) {
			if _, ok := c.w.nc.(*shmConn); !ok {
				t.Errorf("rank %d's %s connection to rank %d is a %T, not shared memory", m.rank, c.role, c.peer, c.w.nc)
			}
		})
	}
}

// testSegment makes a shared segment of this process and its offer, unmapped and closed when
// the test ends; it skips the test where there is no memfd.
func testSegment(t *testing.T) (seg, offer []byte) {
	t.Helper()
	seg, offer, done := newSegment()
	if seg == nil {
		t.Skip("no memfd here")
	}
	t.Cleanup(done)
	t.Cleanup(func() { unmap(seg) })
	return seg, offer
}

// An offer is taken only when it names a segment of this host with the right token.
func TestOpenSegment(t *testing.T) {
	seg, offer := testSegment(t)
	mapped := openSegment(offer)
	if mapped == nil {
		t.Fatal("a segment of this process could not be opened")
	}
	mapped[100] = 42 // the same memory
	if seg[100] != 42 {
		t.Error("the opened segment is not the offered one")
	}
	unmap(mapped)
	strs, _ := decodeStrings(offer, 3)
	for name, bad := range map[string][]string{
		"wrong token":   {strs[0], strs[1], hex.EncodeToString(bytes.Repeat([]byte{7}, tokenSize))},
		"short token":   {strs[0], strs[1], "abcd"},
		"no such fd":    {strs[0], "999999", strs[2]},
		"no such pid":   {strconv.Itoa(1 << 30), strs[1], strs[2]},
		"not a process": {"self/../..", strs[1], strs[2]},
	} {
		if s := openSegment(encodeStrings(bad)); s != nil {
			unmap(s)
			t.Errorf("%s: the offer was taken", name)
		}
	}
	if openSegment([]byte("garbage")) != nil {
		t.Error("a malformed offer was taken")
	}
	if !sameNetwork(strconv.Itoa(os.Getpid())) {
		t.Error("this process is not in its own network namespace")
	}
}

// With NoSharedMemory on either side, connections stay on their sockets and work.
func TestNoSharedMemory(t *testing.T) {
	for _, side := range []int{0, 1} {
		meshes, recs := startMeshes(t, 2, func(rank int, c *Config) { c.NoSharedMemory = rank == side })
		meshes[0].eachConn(func(c *conn) {
			if _, ok := c.w.nc.(*shmConn); ok {
				t.Errorf("NoSharedMemory on rank %d: the %s connection is shared memory", side, c.role)
			}
		})
		if err := meshes[0].Send(1, Owner, Header{Type: TypeUser}, []byte("over the socket")); err != nil {
			t.Fatal(err)
		}
		if f := <-recs[1].frames; string(f.p) != "over the socket" {
			t.Fatalf("got %q", f.p)
		}
	}
}

// A reader through shared memory polls past spin while the process is idle, up to
// maxIdleSpin, then sleeps on its socket; in a busy process it sleeps once spin is over.
// Either way the peer's next write wakes it.
func TestIdleReaderPollsOn(t *testing.T) {
	seg, _ := testSegment(t)
	for _, idle := range []bool{true, false} {
		var mu sync.Mutex
		var first, last time.Time
		g := &readerGroup{spin: 20 * time.Microsecond, idle: func() bool {
			mu.Lock()
			defer mu.Unlock()
			last = time.Now()
			if first.IsZero() {
				first = last
			}
			return idle
		}}
		rs, ws := net.Pipe()
		up, down := rings(seg)
		reader := &shmConn{sock: rs, seg: seg, in: down, out: up, readers: g}
		writer := &shmConn{sock: ws, seg: seg, in: up, out: down, readers: &readerGroup{}}
		got := make(chan string)
		go func() {
			b := make([]byte, 16)
			n, err := reader.Read(b)
			if err != nil {
				t.Error(err)
			}
			got <- string(b[:n])
		}()
		for deadline := time.Now().Add(10 * time.Second); g.onSocket.Load() == 0; { // until the reader sleeps
			if time.Now().After(deadline) {
				t.Fatalf("idle %v: the reader still polls after 10s", idle)
			}
			time.Sleep(100 * time.Microsecond)
		}
		mu.Lock()
		consulted := last.Sub(first)
		mu.Unlock()
		if idle && consulted < maxIdleSpin/2 {
			t.Errorf("idle: the reader slept after polling on for %v, want about %v", consulted, maxIdleSpin)
		}
		if !idle && consulted != 0 {
			t.Errorf("busy: the reader polled on past spin for %v", consulted)
		}
		if _, err := writer.Write([]byte("wake up")); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "wake up" {
			t.Errorf("idle %v: read %q", idle, s)
		}
		rs.Close()
		ws.Close()
	}
}
