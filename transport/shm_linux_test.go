package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Processes of one host (here: meshes of one process) talk through shared memory, both
// ways, on both connections of every pair, and SharedMemory says so.
func TestSameHostUsesSharedMemory(t *testing.T) {
	meshes, _ := startMeshes(t, 3, nil)
	for _, m := range meshes {
		m.eachConn(func(c *conn) {
			if _, ok := c.w.nc.(*shmConn); !ok {
				t.Errorf("rank %d's %s connection to rank %d is a %T, not shared memory", m.rank, c.role, c.peer, c.w.nc)
			}
			if !m.SharedMemory(c.peer, c.role) {
				t.Errorf("rank %d: SharedMemory(%d, %s) is false", m.rank, c.peer, c.role)
			}
		})
		if m.SharedMemory(m.rank, Owner) || m.SharedMemory(-1, Owner) {
			t.Errorf("rank %d: SharedMemory is true of itself or of rank -1", m.rank)
		}
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
			if _, ok := c.w.nc.(*shmConn); ok || meshes[0].SharedMemory(c.peer, c.role) {
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
		g.crowd.runnable = quietHost
		rs, ws := net.Pipe()
		up, down := freshRings(seg)
		reader := newShmConn(rs, seg, down, up, g)
		writer := newShmConn(ws, seg, up, down, &readerGroup{})
		got := make(chan string)
		go func() {
			b := make([]byte, 16)
			n, err := reader.Read(b)
			if err != nil {
				t.Error(err)
			}
			got <- string(b[:n])
		}()
		for deadline := time.Now().Add(10 * time.Second); g.asleep.Load() == 0; { // until the reader sleeps
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

// doorbell is a socket under a shmConn whose reads wait for end, then fail with err: a
// socket that ends (a peer that closes, a reset that drops the wake-up byte) while the ring
// still holds bytes. Writes are discarded.
type doorbell struct {
	net.Conn
	end chan struct{}
	err error
}

func (d *doorbell) Read([]byte) (int, error)    { <-d.end; return 0, d.err }
func (d *doorbell) Write(p []byte) (int, error) { return len(p), nil }

// A reader through shared memory whose socket ends reads what its ring still holds first:
// the peer wrote its last messages (its final marker, its goodbye) before it closed, and
// the socket is only a doorbell.
func TestSharedMemoryReaderDrainsItsRingAtTheEnd(t *testing.T) {
	seg, _ := testSegment(t)
	for _, sockErr := range []error{io.EOF, syscall.ECONNRESET} {
		up, down := freshRings(seg)
		g := &readerGroup{}
		bell := &doorbell{end: make(chan struct{}), err: sockErr}
		reader := newShmConn(bell, seg, down, up, g)
		writer := newShmConn(&doorbell{}, seg, up, down, &readerGroup{})
		got := make(chan string)
		go func() {
			var all []byte
			b := make([]byte, 16)
			for {
				n, err := reader.Read(b)
				all = append(all, b[:n]...)
				if err != nil {
					break
				}
			}
			got <- string(all)
		}()
		for deadline := time.Now().Add(10 * time.Second); g.asleep.Load() == 0; { // until the reader sleeps
			if time.Now().After(deadline) {
				t.Fatal("the reader does not sleep on its socket")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if _, err := writer.Write([]byte("last words")); err != nil {
			t.Fatal(err)
		}
		close(bell.end) // the socket ends, and its wake-up byte is lost
		if s := <-got; s != "last words" {
			t.Errorf("socket error %v: the reader read %q before the end, want the ring's %q", sockErr, s, "last words")
		}
	}
}

// The positions of a ring go past 2^31, 2^32 and 2^64 bytes (a location of 2 GiB and more,
// a long job) without a byte lost or misplaced: they start just before each.
func TestSharedMemoryCountsWrap(t *testing.T) {
	seg, _ := testSegment(t)
	msg := make([]byte, shmRing+shmRing/3) // more than a ring, so the records wrap too
	for i := range msg {
		msg[i] = byte(i * 7 / 3)
	}
	for _, start := range []uint64{1<<31 - 1000, 1<<32 - 1000, 1<<64 - 1000} {
		up, down := freshRings(seg)
		down.h.read.Store(start)
		reader := newShmConn(&doorbell{end: make(chan struct{})}, seg, down, up, pollingGroup(time.Hour))
		writer := newShmConn(&doorbell{}, seg, up, down, &readerGroup{})
		writer.out.pos, writer.out.read = start, start
		errs := make(chan error, 1)
		go func() { _, err := writer.Write(msg); errs <- err }()
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(reader, got); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Errorf("positions from %#x: the bytes read differ from those written", start)
		}
		if end := down.h.read.Load(); end != writer.out.pos || end-start < uint64(len(msg)) {
			t.Errorf("positions from %#x: the reader ends at %#x, the writer at %#x, after %d bytes", start, end, writer.out.pos, len(msg))
		}
	}
}

// freshRings returns the rings of seg, emptied.
func freshRings(seg []byte) (up, down ring) {
	up, down = rings(seg)
	for _, r := range []ring{up, down} {
		*r.h = ringHeader{}
		clear(r.data)
	}
	return up, down
}

// The reader of a connection whose messages a task reads (Poller.Poll) sees its position move
// and does not fall asleep, which would cost the writer a wake-up on the socket; a reader
// that does sleep is woken by one byte, however many writes follow.
func TestReaderStaysAwakeWhileATaskReads(t *testing.T) {
	seg, _ := testSegment(t)
	up, down := freshRings(seg)
	g := pollingGroup(20 * time.Millisecond)
	bell := &doorbell{end: make(chan struct{}), err: io.EOF}
	reader := newShmConn(bell, seg, down, up, g)
	wakes := &countingSocket{}
	writer := newShmConn(wakes, seg, up, down, &readerGroup{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the connection's reader, which awaits as conn.next does
		defer close(done)
		for !isClosed(stop) {
			reader.await(nil)
			runtime.Gosched()
		}
	}()
	buf := make([]byte, 8)
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
		if _, err := writer.Write([]byte("grant")); err != nil {
			t.Fatal(err)
		}
		for !reader.in.ready() { // the task reads what came
		}
		reader.in.take(buf)
		if g.asleep.Load() != 0 {
			t.Fatal("the reader fell asleep while a task read its messages")
		}
	}
	// Asleep now, it is woken once by the first of three writes.
	for g.asleep.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	for range 3 {
		writer.Write([]byte("late"))
	}
	if n := wakes.writes.Load(); n != 1 {
		t.Errorf("%d wake-up bytes for one sleep, want 1", n)
	}
	close(stop)
	close(bell.end)
	<-done
}

// countingSocket counts the writes of a shared-memory connection's socket (its wake-ups),
// which it discards, and the reads (its reader's sleeps), which go to Conn.
type countingSocket struct {
	net.Conn
	writes, reads atomic.Int64
}

func (c *countingSocket) Write(p []byte) (int, error) { c.writes.Add(1); return len(p), nil }
func (c *countingSocket) Read(p []byte) (int, error)  { c.reads.Add(1); return c.Conn.Read(p) }

// A reader that sleeps between most records is woken for every one of them: nothing is late
// for good, nothing is lost or reordered.
func TestSleepingReaderMissesNoRecord(t *testing.T) {
	seg, _ := testSegment(t)
	up, down := freshRings(seg)
	rs, ws := socketPair(t) // buffered: a wake-up byte never waits for the reader
	sleeps := &countingSocket{Conn: rs}
	g := &readerGroup{} // no polling: it sleeps at once
	reader := newShmConn(sleeps, seg, down, up, g)
	writer := newShmConn(ws, seg, up, down, &readerGroup{})
	const n = 20000
	errs := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		var b [8]byte
		for i := range n {
			binary.LittleEndian.PutUint64(b[:], uint64(i))
			if _, err := writer.Write(b[:]); err != nil {
				errs <- err
				return
			}
			if i%20 == 0 { // a record for a reader that read everything and fell asleep
				for down.h.read.Load() != writer.out.pos || g.asleep.Load() == 0 {
					runtime.Gosched()
				}
			}
			for range rng.IntN(3000) { // and for one falling asleep
			}
		}
		errs <- nil
	}()
	var b [8]byte
	for i := range n {
		if _, err := io.ReadFull(reader, b[:]); err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint64(b[:]); got != uint64(i) {
			t.Fatalf("record %d reads %d", i, got)
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if sleeps.reads.Load() < n/20 {
		t.Errorf("the reader slept %d times in %d records, want many", sleeps.reads.Load(), n)
	}
}

// socketPair returns two connected Unix sockets, closed when the test ends.
func socketPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns[0], conns[1]
}

// Messages of every size up to past 64 KiB, sent in bursts, reach the peer whole and in
// order through shared memory: a record holds several frames (read in place in the ring,
// one after the other), a large payload comes in records of its own after its header's
// (read through the buffers), and small and large ones alternate.
func TestSharedMemoryMessagesOfEverySize(t *testing.T) {
	meshes, recs := startMeshes(t, 2, func(_ int, c *Config) { c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour })
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([][]byte, 1500)
	for i := range msgs {
		n := rng.IntN(16)
		switch i % 3 {
		case 1:
			n = rng.IntN(4096)
		case 2:
			n = rng.IntN(70000)
		}
		msgs[i] = make([]byte, n)
		for j := range msgs[i] {
			msgs[i][j] = byte(rng.Uint32())
		}
	}
	errs := make(chan error, 1)
	go func() {
		for i, p := range msgs {
			if err := meshes[0].SendAhead(1, Requester, Header{Type: TypeUser, Arg: int64(i)}, p); err != nil {
				errs <- err
				return
			}
			if i%5 == 4 || i == len(msgs)-1 {
				if err := meshes[0].Flush(1, Requester, i%2 == 0); err != nil {
					errs <- err
					return
				}
			}
		}
		errs <- nil
	}()
	for i, want := range msgs {
		var f received
		select {
		case f = <-recs[1].frames:
		case err := <-recs[1].lost:
			t.Fatalf("before message %d: %v", i, err)
		case <-time.After(time.Minute):
			t.Fatalf("message %d has not come", i)
		}
		if f.h.Arg != int64(i) || !bytes.Equal(f.p, want) {
			t.Fatalf("message %d: got number %d with %d bytes (equal: %v), want %d bytes", i, f.h.Arg, len(f.p), bytes.Equal(f.p, want), len(want))
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// While a task of the reader's process polls the ring, the writer sends no wake-up to the
// sleeping reader, whatever it writes; the task wakes the reader from its own process
// (wakeHere) for what it leaves.
func TestPollingTaskSparesTheWakeUps(t *testing.T) {
	seg, _ := testSegment(t)
	up, down := freshRings(seg)
	rs, _ := socketPair(t)
	g := &readerGroup{} // no polling: it sleeps at once
	reader := newShmConn(rs, seg, down, up, g)
	wakes := &countingSocket{}
	writer := newShmConn(wakes, seg, up, down, &readerGroup{})
	down.h.polling.Add(1) // a task polls the reader's ring
	woke := make(chan error, 1)
	go func() { woke <- reader.await(nil) }()
	for g.asleep.Load() == 0 { // asleep
		time.Sleep(100 * time.Microsecond)
	}
	for range 3 {
		if _, err := writer.Write([]byte("grant")); err != nil {
			t.Fatal(err)
		}
	}
	if n := wakes.writes.Load(); n != 0 {
		t.Errorf("%d wake-up bytes while a task polled, want 0", n)
	}
	select {
	case err := <-woke:
		t.Fatalf("the reader woke with no wake-up (%v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	down.h.polling.Add(-1) // the task leaves what it did not read to the reader
	reader.wakeHere()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader still sleeps 10s after wakeHere")
	}
	buf := make([]byte, 64)
	for range 3 {
		if n := reader.in.take(buf); string(buf[:n]) != "grant" {
			t.Fatalf("the reader read %q, want the 3 grants", buf[:n])
		}
	}
	// Nobody polls now: the writer wakes the next sleep itself.
	go func() { woke <- reader.sleep() }()
	for g.asleep.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	writer.Write([]byte("late"))
	if n := wakes.writes.Load(); n != 1 {
		t.Errorf("%d wake-up bytes once no task polls, want 1", n)
	}
	rs.Close() // the byte went nowhere: end the sleep
	<-woke
}

// A writer has room for n bytes when its position is at most shmRing-n bytes past the
// reader's, which it loads again only when the one it last loaded leaves too little
// (ringWriter.hasRoom, which a sender asks before it writes under its connection's lock).
func TestRingWriterHasRoom(t *testing.T) {
	seg, _ := testSegment(t)
	up, _ := freshRings(seg)
	w := ringWriter{ring: up, pos: shmRing - 64}
	if !w.hasRoom(64) || w.hasRoom(72) {
		t.Errorf("64 bytes free: hasRoom(64) = %v, hasRoom(72) = %v, want true and false", w.hasRoom(64), w.hasRoom(72))
	}
	up.h.read.Store(8) // the reader moved on
	if !w.hasRoom(72) || w.read != 8 {
		t.Errorf("72 bytes free: hasRoom(72) = %v with the reader at %d, want true at 8", w.hasRoom(72), w.read)
	}
}

// A batch of small messages through shared memory goes into the ring as one record, written
// in place (conn.writeRecord): the reader finds the frames of all of them in that record, in
// order, and reads each in place; under the race detector, the sent count counts them all
// before the record shows (peer.wrote).
func TestSmallBatchIsOneRingRecord(t *testing.T) {
	c, reader := ringConns(t)
	batch := []outMsg{
		{h: Header{Type: TypeUser, Seq: 1}, p: []byte("release")},
		{h: Header{Type: TypeUser + 1, Seq: 2}, p: bytes.Repeat([]byte{7}, 200)}, // a 2-byte length
		{h: Header{Type: TypeUser, Seq: 3}},
	}
	for i := range batch {
		batch[i].h.Len = uint64(len(batch[i].p))
	}
	if err := c.writeBatch(batch); err != nil {
		t.Fatal(err)
	}
	if n := c.m.peers[1].sent.Load(); raceDetector && n != 3 {
		t.Errorf("under the race detector, sent counts %d messages, want 3", n)
	}
	rec, ok := reader.shm.in.next()
	if !ok || len(rec) != ringFrames(batch) {
		t.Fatalf("the ring holds a record of %d bytes (%v), want one of the batch's %d", len(rec), ok, ringFrames(batch))
	}
	for _, want := range batch {
		readInPlace(t, reader, want)
	}
	if reader.shm.in.arrived() || reader.shm.in.h.read.Load() != c.shm.out.pos {
		t.Errorf("the reader is at %d after the record, the writer at %d", reader.shm.in.h.read.Load(), c.shm.out.pos)
	}
}

// A small message sent directly (SendNow) on an idle connection through shared memory is
// written from its header into a ring record of its own, never queued; one queued (Send)
// waits in the queue for the writer.
func TestSendNowWritesInPlace(t *testing.T) {
	c, reader := ringConns(t)
	h := Header{Type: TypeUser, Key: 3, Seq: 9, Len: 77} // Len is the payload's
	if err := c.enqueueMsg(&h, []byte("grant"), direct); err != nil {
		t.Fatal(err)
	}
	if sent := c.m.peers[1].sent.Load(); len(c.q) != 0 || raceDetector && sent != 1 {
		t.Fatalf("after SendNow: %d queued, %d sent (race detector %v), want 0 and 1", len(c.q), sent, raceDetector)
	}
	if rec, _ := reader.shm.in.next(); len(rec) != frameSize(5) {
		t.Fatalf("the ring holds a record of %d bytes, want the message's frame of %d", len(rec), frameSize(5))
	}
	readInPlace(t, reader, outMsg{h: Header{Type: TypeUser, Key: 3, Seq: 9, Len: 5}, p: []byte("grant")})
	h = Header{Type: TypeUser, Seq: 10}
	if err := c.enqueueMsg(&h, []byte("later"), queued); err != nil {
		t.Fatal(err)
	}
	if len(c.q) != 1 || reader.shm.in.arrived() {
		t.Errorf("after Send: %d queued, in the ring: %v; want 1 and false", len(c.q), reader.shm.in.arrived())
	}
}

// A small message sent ahead (SendAhead) on an idle connection through shared memory is
// written into the ring at once, but wakes the peer's sleeping reader only with the flush
// that the caller promised: nothing but memory is written under the caller's locks. A
// reader that is awake reads it without a wake-up: nothing is left for the flush.
func TestSendAheadWritesInPlaceAndFlushWakes(t *testing.T) {
	c, reader := ringConns(t)
	wakes := &countingSocket{}
	c.shm.sock = wakes
	h := Header{Type: TypeUser, Seq: 3}
	if err := c.enqueueMsg(&h, []byte("grant"), ahead); err != nil {
		t.Fatal(err)
	}
	if c.flushDue.Load() {
		t.Error("after SendAhead to an awake reader: a flush is due, want none")
	}
	if err := c.flush(direct); err != nil || wakes.writes.Load() != 0 {
		t.Errorf("Flush with nothing due: %v and %d wake-ups, want nil and 0", err, wakes.writes.Load())
	}
	readInPlace(t, reader, outMsg{h: Header{Type: TypeUser, Seq: 3, Len: 5}, p: []byte("grant")})
	sendAheadToSleeper(t)
}

// sendAheadToSleeper is TestSendAheadWritesInPlaceAndFlushWakes with the peer's reader
// asleep.
func sendAheadToSleeper(t *testing.T) {
	c, reader := ringConns(t)
	wakes := &countingSocket{}
	c.shm.sock = wakes
	reader.shm.in.h.sleeping.Store(asleep) // the peer's reader sleeps
	h := Header{Type: TypeUser, Seq: 4}
	if err := c.enqueueMsg(&h, []byte("release"), ahead); err != nil {
		t.Fatal(err)
	}
	if len(c.q) != 0 || !reader.shm.in.arrived() || wakes.writes.Load() != 0 {
		t.Fatalf("after SendAhead: %d queued, in the ring: %v, %d wake-ups; want 0, true, 0", len(c.q), reader.shm.in.arrived(), wakes.writes.Load())
	}
	if err := c.flush(direct); err != nil {
		t.Fatal(err)
	}
	if n := wakes.writes.Load(); n != 1 {
		t.Errorf("after Flush: %d wake-ups, want 1", n)
	}
	readInPlace(t, reader, outMsg{h: Header{Type: TypeUser, Seq: 4, Len: 7}, p: []byte("release")})
}

// ringConns returns the two ends of a connection through shared memory: c writes (as rank
// 0's end to rank 1), reader reads what c writes (rank 1's end).
func ringConns(t *testing.T) (c, reader *conn) {
	seg, _ := testSegment(t)
	up, down := freshRings(seg)
	writer := newShmConn(&doorbell{}, seg, up, down, &readerGroup{})
	reader = &conn{m: &Mesh{peers: make([]peer, 2)}, peer: 0, w: newWire(nil, false),
		shm: newShmConn(&doorbell{end: make(chan struct{})}, seg, down, up, &readerGroup{})}
	c = &conn{m: &Mesh{peers: make([]peer, 2)}, peer: 1, w: newWire(writer, false), shm: writer}
	c.w.useShm(writer)
	return c, reader
}

// readInPlace reads the next message in reader's ring, in place, and checks it is want.
func readInPlace(t *testing.T, reader *conn, want outMsg) {
	t.Helper()
	frame, size, inRing := reader.ringFrame()
	if !inRing {
		t.Fatalf("message %+v: not read in place", want.h)
	}
	var h Header
	p, _, err := openMessage(&h, frame, opBinary, true, int64(len(frame)), func(h *Header) ([]byte, error) { return make([]byte, h.Len), nil })
	if err != nil || h != want.h || !bytes.Equal(p, want.p) {
		t.Fatalf("read %+v %q %v, want %+v %q", h, p, err, want.h, want.p)
	}
	reader.shm.in.consume(size)
}

// On a crowded host, a task whose message has come by the time it polls reads it without
// telling the writers it polls (ringHeader.polling, which each write of the peer reads);
// a task that finds nothing tells them from its first look on.
func TestPollTellsTheWritersOnlyToWait(t *testing.T) {
	var got atomic.Int32
	h := &sinkHandler{recorder: *newRecorder(), mirror: make([]byte, 8)}
	h.onRecv = func(int, *Header, []byte) { got.Add(1) }
	meshes, _ := startMeshes(t, 2, func(rank int, c *Config) {
		c.Spin, c.Oversubscribed = time.Hour, true
		c.Heartbeat, c.PeerTimeout = time.Hour, 2*time.Hour // no write but the test's wakes the reader
		if rank == 1 {
			c.Handler = h
		}
	})
	in := meshes[1].peers[0].conns[Owner].Load().shm.in.h // rank 0's Requester messages
	for in.sleeping.Load() != asleep {                    // the reader sleeps at once: crowded
		time.Sleep(100 * time.Microsecond)
	}
	in.polling.Add(1) // no wake-up for the reader: the message waits for the task
	if err := meshes[0].SendNow(1, Requester, Header{Type: TypeUser}, []byte("grant")); err != nil {
		t.Fatal(err)
	}
	in.polling.Add(-1)
	var seen []int32 // polling, as the task's looks leave it
	poller := meshes[1].Poller()
	poller.Poll(func() bool { seen = append(seen, in.polling.Load()); return got.Load() == 1 }, nil)
	if got.Load() != 1 || !slices.Equal(seen, []int32{0, 0}) {
		t.Errorf("a message that had come: %d read, polling %v as the task looked, want 1 read and [0 0]", got.Load(), seen)
	}
	seen = nil
	poller.Poll(func() bool { seen = append(seen, in.polling.Load()); return len(seen) == 3 }, nil)
	if !slices.Equal(seen, []int32{0, 1, 1}) || in.polling.Load() != 0 {
		t.Errorf("nothing to read: polling %v as the task looked, %d after, want [0 1 1] and 0", seen, in.polling.Load())
	}
}
