package transport

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/internal/release"
)

// Shared memory between two processes of one host. When a mesh connection is dialed and
// authenticated, the dialer offers a segment (see newSegment): shared memory with two rings,
// one each way, that the acceptor can map only from the same host, as the same user, in the
// same network namespace (emulated hosts are other hosts). If it can, both sides carry the
// connection's bytes through the rings instead of the socket, and the socket stays open to
// wake a reader that sleeps and to find a peer that dies (ring.go says how the bytes are
// laid out). A reader polls its ring for a while (Config.Spin) before it sleeps, and so does
// a task that waits for a message (Poller.Poll), which it then reads itself; a writer
// whose ring is full polls, then backs off. Everything above the bytes (frames, messages,
// liveness) is the same as over the network.

// shmOffer is the dialer's side: it makes a segment and offers it on w (authenticated, still
// on the socket); when the acceptor takes it, w carries its bytes through the segment from
// then on. Where no segment can be made it offers nothing, and w stays on the socket.
func (m *Mesh) shmOffer(w *wire) error {
	w.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer w.nc.SetDeadline(time.Time{})
	var seg, offer []byte
	done := func() {}
	if !m.cfg.NoSharedMemory {
		seg, offer, done = newSegment()
	}
	if seg == nil {
		return w.writeMsg(Header{Type: TypeShmOffer}, nil) // no offer
	}
	defer done() // the acceptor has mapped it by the time it answers
	if err := w.writeMsg(Header{Type: TypeShmOffer}, offer); err != nil {
		unmap(seg)
		return err
	}
	h, _, err := w.readMsg(TypeShmAnswer, 0)
	if err != nil || h.Flags == 0 {
		unmap(seg)
		return err
	}
	up, down := rings(seg)
	w.useShm(newShmConn(w.nc, seg, down, up, &m.readers))
	return nil
}

// shmAnswer is the acceptor's side: it reads the dialer's offer on w and takes the segment
// when it can map it; it answers any offer, and nothing to no offer.
func (m *Mesh) shmAnswer(w *wire) error {
	w.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer w.nc.SetDeadline(time.Time{})
	_, offer, err := w.readMsg(TypeShmOffer, maxOffer)
	if err != nil {
		return err
	}
	if len(offer) == 0 {
		return nil
	}
	var seg []byte
	if !m.cfg.NoSharedMemory {
		seg = openSegment(offer)
	}
	answer := Header{Type: TypeShmAnswer}
	if seg != nil {
		answer.Flags = 1
	}
	if err := w.writeMsg(answer, nil); err != nil {
		unmap(seg)
		return err
	}
	if seg != nil {
		up, down := rings(seg)
		w.useShm(newShmConn(w.nc, seg, up, down, &m.readers))
	}
	return nil
}

// maxOffer bounds the payload of an offer.
const maxOffer = 256

// newToken returns a segment's token.
func newToken() []byte {
	t := make([]byte, tokenSize)
	rand.Read(t)
	return t
}

// useShm makes w read and write through c from now on.
func (w *wire) useShm(c *shmConn) {
	w.nc = c
	w.src.r = c
	w.masks, w.peerMasks = false, false
}

// A Poller is the seat of one goroutine at a time in Poll (a Poll that finds it taken
// returns at once): Close waits for the pollers that poll before it unmaps the shared
// memory, and a Poll that begins after Close reads nothing.
type Poller struct {
	m       *Mesh
	polling atomic.Bool // in Poll, from before its look at m.closing
	watch   watchList   // the connections that its Poll looks at
}

// Poller returns a new Poller of m, which m keeps until it is closed: a goroutine that
// waits again and again (a task) keeps its own.
func (m *Mesh) Poller() *Poller {
	p := &Poller{m: m}
	m.lifeMu.Lock()
	m.pollers = append(m.pollers, p)
	m.lifeMu.Unlock()
	return p
}

// Poll reads, on the calling goroutine, the messages of less than 64 KiB that have arrived
// whole, in one frame, from processes of this host (through shared memory) and delivers
// them to the Handler, until done reports true, stop is closed, or the readers' polling
// time is over (Config.Spin; see readerGroup.pollOn). A goroutine that waits for a message
// calls it before it sleeps: it then reads the message itself rather than being woken by
// the connection's reader, a goroutine switch each way; the readers read everything else
// meanwhile. It yields at once when a message waits that is the readers' to read, and
// otherwise every few looks (readerGroup.looksPerYield): in an idle process, the goroutines
// it keeps waiting, readers with nothing to read and the heartbeat, wait a few microseconds
// at most. While a task polls on a crowded host, where the readers sleep at once, the
// peers' writers do not wake them (a socket write, and a thread woken, per message; see
// shmConn.Write), from its first look that finds nothing: the task reads what comes, and
// wakes a reader for what it leaves (leaveRings) as it returns; there it looks only at the
// connections that deliver (watchList), the others' readers being woken by their writers as
// where no task polls. It returns at once when the readers do not poll or no connection
// goes through shared memory. It must not be called from Handler methods, nor with a lock
// that a Handler method may take.
func (p *Poller) Poll(done func() bool, stop <-chan struct{}) {
	m := p.m
	onRings := m.onRings.Load()
	if m.readers.spin == 0 || onRings == nil {
		return
	}
	// Close unmaps the segments once no poller polls, after it set closing: polling is
	// stored before closing is loaded, and Close loads it after it stored closing. Its end
	// needs no more than release ordering, on the way out of every wait.
	if !p.polling.CompareAndSwap(false, true) {
		return
	}
	defer release.Bool(&p.polling, false)
	if m.readers.manySchedulers {
		m.readers.pollers.Add(1)
		defer m.readers.pollers.Add(-1)
	}
	if m.closing.Load() {
		return
	}
	every := m.readers.looksPerYield()
	// Where the readers sleep at once (sleepAtOnce), the task looks only at the connections
	// that its watch list holds, and tells their writers it polls (ringHeader.polling) once a
	// look found nothing, so that a wait whose messages have come already writes nothing
	// into the rings' headers, which the peers' writers read. Elsewhere it looks at every
	// connection: where each process keeps its core a look costs no cache miss, and the
	// readers poll too, for longer only while none of them sleeps (readerGroup.idleOnRings).
	readersSleep, polling := m.readers.sleepAtOnce(), false
	conns := *onRings // a connection that comes later wakes its reader as before
	if readersSleep {
		conns = p.watch.watched(onRings)
	}
	defer func() {
		if polling {
			leaveRings(conns)
		}
	}()
	poll, read := poller{task: true}, false
	for looks := 1; !done() && !m.closing.Load(); looks++ {
		if read { // what the last look delivered may have readied goroutines: they run first
			runtime.Gosched()
		}
		left := false
		read = false
		for _, c := range conns {
			switch c.readWaiting() {
			case readHere:
				read = true
			case leftToReader:
				left = true
				c.shm.wakeHere() // its writer may have left the wake-up to this task
			}
		}
		switch {
		case read:
			poll, looks = poller{task: true}, 0
		case readersSleep && !polling:
			polling = true
			for _, c := range conns {
				c.shm.in.h.polling.Add(1)
			}
		case !left && looks%every != 0: // looks again at once, after a spin-wait hint
			spinPause()
		case isClosed(stop) || !poll.next(&m.readers): // yields
			return
		}
	}
}

// Await polls done alone, on the calling goroutine, as Poll polls for a message, until done
// reports true, stop is closed, or the polling time is over: for a task that waits for a
// word that another process of the host stores in memory they share, with no message to
// read (a pair's counters, package orwl). On a crowded host it gives its core away at every
// look, as Poll does, and counts awaitBatch looks as one of Poll's. Unlike Poll it touches
// none of the mesh's memory, and may be called at any time.
func (p *Poller) Await(done func() bool, stop <-chan struct{}) {
	g := &p.m.readers
	if g.spin == 0 {
		return
	}
	every := g.looksPerYield()
	crowded := g.sleepAtOnce()
	poll := poller{task: true, await: true}
	for looks := 1; !done(); looks++ {
		switch {
		case crowded && looks%awaitBatch != 0: // the core's other threads first
			yieldCore()
		case !crowded && looks%every != 0:
			spinPause()
		case isClosed(stop) || !poll.next(g):
			return
		}
	}
}

// awaitBatch is how many looks Await makes on a crowded host between two of the poller's
// decisions (poller.next: the clock, the host's load, a yield to the process's other
// goroutines): a look there is little more than a yield of the core.
const awaitBatch = 16

// leaveRings ends a task's polling of the rings of conns: it reads the messages that are
// left, up to maxLeftovers a connection, and wakes the readers of the connections where
// something still waits, which their writers may have left to the task.
func leaveRings(conns []*conn) {
	for _, c := range conns {
		c.shm.in.h.polling.Add(-1)
		for range maxLeftovers {
			if c.readWaiting() != readHere {
				break
			}
		}
		if c.pending.Load() || c.shm.in.arrived() {
			c.shm.wakeHere()
		}
	}
}

// maxLeftovers is how many messages a task that is done polling still reads from each
// connection before it goes, rather than wake the connection's reader for them: a peer
// often writes two in a row (the release of one location, the grant of another), and the
// task's wait may end with the first.
const maxLeftovers = 4

// busyLooks is how many times Poll looks for a message between two yields: a look takes a
// few tens of nanoseconds, a yield about a hundred, after which the message may have been
// read by the connection's reader instead, one more goroutine switch away.
const busyLooks = 16

// idleBusyLooks is busyLooks in an idle process: a few microseconds of looks, longer than
// most waits for a small message from a process of the same host, which then cost no
// goroutine switch at all.
const idleBusyLooks = 256

// looksPerYield is how many times Poll looks between two yields: one where the readers
// sleep at once (a crowded host, as last sampled, or many schedulers), where a look over
// every connection is already long beside the wait for the host's other threads, and
// pollOn's answer may change with the process's other tasks; idleBusyLooks in an idle
// process whose connections all go through shared memory, asleep or not (Poll reads their
// rings itself); busyLooks otherwise.
func (g *readerGroup) looksPerYield() int {
	switch {
	case g.sleepAtOnce():
		return 1
	case g.sockets.Load() == 0 && g.idleProcess():
		return idleBusyLooks
	}
	return busyLooks
}

// idleOnRings reports whether the process is idle and no connection of the mesh waits on
// its socket: nothing that a reader's polling would delay.
func (g *readerGroup) idleOnRings() bool {
	return g.sockets.Load()+g.asleep.Load() == 0 && g.idleProcess()
}

// idleProcess reports whether every task of the process waits for a message (Config.Idle);
// false without Idle.
func (g *readerGroup) idleProcess() bool {
	return g.idle != nil && g.idle()
}

// isClosed reports whether ch is closed; a nil ch never is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readerGroup is what the readers of one mesh's shared-memory connections share: how long
// they poll before they sleep, and the counts of connections whose reader waits on its
// socket. Readers poll past spin only while nobody waits on a socket: a reader that yields
// to poll keeps the process's run queue busy, and Go then looks at sockets only every 10ms
// or so (its system monitor), so every reader must poll, or none.
type readerGroup struct {
	spin           time.Duration
	idle           func() bool  // Config.Idle
	manySchedulers bool         // Config.ManySchedulers
	sockets        atomic.Int32 // connections that do not use shared memory: their readers wait on their sockets
	asleep         atomic.Int32 // shared-memory readers asleep on their sockets
	pollers        atomic.Int32 // tasks in Poll, counted with manySchedulers only
	crowd          crowdProbe   // whether the host's cores are oversubscribed (see pollOn)
}

// sleepAtOnce reports whether the readers sleep at once, leaving the polling to the
// tasks that wait (Poller.Poll): on a crowded host, or with Config.ManySchedulers.
func (g *readerGroup) sleepAtOnce() bool {
	return g.manySchedulers || g.crowd.crowded.Load()
}

// maxIdleSpin bounds how long a reader polls in an idle process (Config.Idle).
const maxIdleSpin = 10 * time.Millisecond

// pollMode is how a reader that has polled for a while goes on.
type pollMode uint8

const (
	// pollStop: the reader sleeps on its socket.
	pollStop pollMode = iota
	// pollYield: it looks again after yielding its processor to the rest of the process.
	pollYield
	// pollYieldThread: the host is crowded; it looks again after yielding its thread's core
	// to the host's other runnable threads too, so a thread with work to do (the peer that
	// will write, or another program) runs first.
	pollYieldThread
)

// pollOn says how a poller that has polled for polled goes on, at time now; task says
// whether it is a task waiting in Poll rather than a connection's reader. It polls for spin;
// past spin, only while the process is idle, no connection of the mesh waits on its socket
// and the host is not crowded, up to maxIdleSpin. On a crowded host (or one that the job
// oversubscribes) only a task polls, for spin, giving its core away at every look, and with
// many schedulers (Config.ManySchedulers) too, unless it is the only task of an idle process
// that polls (the host's load then counts the runtime's own spinning threads): a task
// reads the messages it waits for itself, and a process whose readers poll too has as
// many threads wanting a core as it has processors, each of whose looks then waits for a
// turn of every other: with its readers polling too, a stencil of 4 to 32 processes on 2
// cores took 1.6 to 9 times as long per iteration (go run ./lab/bench scale).
func (g *readerGroup) pollOn(polled time.Duration, now time.Time, task bool) pollMode {
	switch {
	case g.spin == 0:
		return pollStop
	case g.manySchedulers:
		switch {
		case !task || polled >= g.spin:
			return pollStop
		case g.pollers.Load() > 1 || !g.idleProcess():
			return pollYieldThread
		}
		return pollYield
	case g.crowd.Crowded(now):
		if task && polled < g.spin {
			return pollYieldThread
		}
		return pollStop
	case polled < g.spin:
		return pollYield
	case polled < maxIdleSpin && g.idleOnRings():
		return pollYield
	}
	return pollStop
}

// shmConn is a net.Conn whose bytes go through two rings of a shared segment; the socket
// under it carries only wake-ups (a byte for a reader that sleeps) and its end.
type shmConn struct {
	sock    net.Conn
	seg     []byte
	in      ringReader
	out     ringWriter
	readers *readerGroup
	closed  atomic.Bool
	wakeBuf [64]byte // what a sleeping reader reads
	wakeUp  [1]byte  // what a writer sends a sleeping reader
}

// newShmConn returns a connection that reads in and writes out, with sock under it.
func newShmConn(sock net.Conn, seg []byte, in, out ring, readers *readerGroup) *shmConn {
	return &shmConn{sock: sock, seg: seg, in: ringReader{ring: in}, out: ringWriter{ring: out}, readers: readers}
}

// Read reads what the peer wrote into the in ring, once there is some (see await): at
// most the rest of one record.
func (c *shmConn) Read(p []byte) (int, error) {
	for !c.in.ready() {
		if err := c.await(nil); err != nil {
			return 0, err
		}
	}
	return c.in.take(p), nil
}

// await returns once something was written at the reader's position of the in ring, or
// more (nil: never) reports true: at once, after polling for a while (yielding to the rest
// of the process between two looks; see readerGroup.pollOn), or else after sleeping on the
// socket until the peer's next write wakes it. The socket's end is an error only once the
// ring is drained. It only looks at the ring, so the connection's reader may await while a
// task reads a message (conn.reading); its wait ends too when that task read something,
// moving the reader's position (the connection is busy: its reader does not sleep), or
// left bytes in the read buffers (more).
func (c *shmConn) await(more func() bool) error {
	var poll poller
	for start := c.in.h.read.Load(); ; {
		if c.in.arrived() || c.in.h.read.Load() != start || more != nil && more() {
			return nil
		}
		if c.closed.Load() {
			return net.ErrClosed
		}
		if poll.next(c.readers) {
			continue
		}
		if err := c.sleep(); err != nil {
			return err
		}
		poll = poller{}
	}
}

// drained reports whether the reader has read everything the peer wrote so far; the
// reader's alone may call it.
func (c *shmConn) drained() bool { return !c.in.ready() }

// sleep waits on the socket until the peer's next write into the in ring wakes it, or a
// task of this process that polled instead of it (wakeHere), or returns the socket's error
// once the ring is drained.
func (c *shmConn) sleep() error {
	h := c.in.h
	h.sleeping.Store(asleep)
	if c.in.arrived() { // written meanwhile: its writer may not have seen us sleep
		h.sleeping.Store(awake)
		return nil
	}
	c.readers.asleep.Add(1)
	_, err := c.sock.Read(c.wakeBuf[:])
	c.readers.asleep.Add(-1)
	h.sleeping.Store(awake)
	if errors.Is(err, os.ErrDeadlineExceeded) { // woken here
		c.sock.SetReadDeadline(time.Time{})
		return nil
	}
	if err != nil && !c.in.arrived() {
		// The ring is drained: the peer wrote everything before its socket ended (a
		// reset may have dropped its wake-up byte).
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return err
	}
	return nil
}

// wakeHere wakes the reader when it sleeps, from this process: its Read on the socket
// returns at once with a deadline in the past. A deadline left over from an earlier sleep
// (the reader was woken by a byte meanwhile) wakes it once more, for nothing.
func (c *shmConn) wakeHere() {
	if s := &c.in.h.sleeping; s.Load() == asleep && s.CompareAndSwap(asleep, woken) {
		c.sock.SetReadDeadline(time.Unix(1, 0))
	}
}

// poller is the state of one polling reader or task: how long it has polled, and its looks since it
// last read the clock. The clock (time.Now costs about half a yield) and the group's
// decision (pollOn, which may sample the host's load) are consulted once every pollBatch
// looks, so that a look is little more than a yield and a peer's write is seen sooner.
type poller struct {
	polled time.Duration // counted as pollStep says
	last   time.Time     // when the clock was last read; zero before the first look
	looks  int           // since last
	mode   pollMode      // pollOn's latest answer
	task   bool          // a task waiting in Poll, not a connection's reader
	// yields says whether a look yields its processor to the process's other goroutines:
	// always for a reader, whose messages ready them; for a task, only where the process
	// has one processor (GOMAXPROCS 1). With more, another processor runs them, and a
	// yield would wake an idle one's thread at every look (runtime.Gosched does), which
	// then takes a core from the polling processes of the host: a remote hand-off between
	// two processes of GOMAXPROCS 2 on 2 cores took 7.8 µs instead of 0.8.
	yields bool
	// await: a task in Await, which yields its processor once every pollBatch looks only
	// when it gives its core away at every look (a crowded host): nothing it waits for runs
	// on it.
	await bool
}

// pollBatch is the number of looks between two readings of the clock.
const pollBatch = 8

// next reports whether the reader polls once more, and if so yields first.
func (p *poller) next(g *readerGroup) bool {
	if p.looks == 0 || p.looks == pollBatch {
		now := time.Now()
		if !p.last.IsZero() {
			p.polled += min(now.Sub(p.last), time.Duration(p.looks)*pollStep)
		}
		p.last, p.looks = now, 0
		p.mode = g.pollOn(p.polled, now, p.task)
		p.yields = !p.task || runtime.GOMAXPROCS(0) == 1
	}
	if p.mode == pollStop {
		return false
	}
	if p.yields && (!p.await || p.looks == 0 || p.mode != pollYieldThread) {
		runtime.Gosched()
	}
	if p.mode == pollYieldThread {
		yieldCore()
	}
	p.looks++
	return true
}

// pollStep is the most that one look of a polling reader counts toward its polling time: a
// yield that takes longer ran the rest of the process meanwhile (a task computing on the
// reader's processor), which cost the reader nothing, so it polls on when the task is done.
const pollStep = 5 * time.Microsecond

// Write writes p into the out ring, waiting for room while the peer reads, and wakes the
// peer's reader when it sleeps and no task of the peer polls the ring (Poller.Poll), which
// then reads the record or wakes the reader itself: the record's header is stored before
// polling is loaded, and a task stops polling before it looks at the ring a last time.
func (c *shmConn) Write(p []byte) (int, error) {
	done := 0
	waited, lastRead := time.Duration(0), c.out.read
	for done < len(p) {
		if c.closed.Load() {
			return done, net.ErrClosed
		}
		n := c.out.put(p[done:])
		if n == 0 {
			waited = c.waitRoom(waited, c.out.read != lastRead)
			lastRead = c.out.read
			continue
		}
		waited, lastRead = 0, c.out.read
		done += n
		if err := c.wakePeer(); err != nil {
			return done, err
		}
	}
	return done, nil
}

// wakePeer wakes the peer's reader after a record was written into the out ring, when the
// reader sleeps and no task of the peer polls the ring (see Write).
func (c *shmConn) wakePeer() error {
	if c.readerSleeps() && c.out.h.sleeping.CompareAndSwap(asleep, woken) {
		_, err := c.sock.Write(c.wakeUp[:])
		return err
	}
	return nil
}

// readerSleeps reports whether the peer's reader sleeps and no task of the peer polls the
// out ring: the records written so far, looked at after their header's store (a full
// barrier), must then wake it (wakePeer); otherwise the reader or the task reads them
// before it sleeps or stops polling.
func (c *shmConn) readerSleeps() bool {
	return c.out.h.sleeping.Load() == asleep && c.out.h.polling.Load() == 0
}

// waitRoom waits a little for the peer to read, and returns how long the writer has waited
// since the reader last made progress: it yields while the reader drains the ring or while
// that time is shorter than the connection's spin, then sleeps in short steps (a reader
// that sleeps itself is woken by the bytes already written).
func (c *shmConn) waitRoom(waited time.Duration, progress bool) time.Duration {
	if progress {
		waited = 0
	}
	if waited < max(c.readers.spin, minRoomSpin) {
		start := time.Now()
		runtime.Gosched()
		return waited + max(time.Since(start), 100*time.Nanosecond)
	}
	time.Sleep(maxRoomWait)
	return waited + maxRoomWait
}

// minRoomSpin is how long a writer waiting for room yields before it sleeps, whatever the
// connection's spin: a reader drains a ring in a fraction of a millisecond.
const minRoomSpin = 200 * time.Microsecond

// maxRoomWait is the longest sleep of a writer waiting for room in its ring.
const maxRoomWait = 50 * time.Microsecond

// Close ends the connection: its socket closes, which the peer sees. The segment stays
// mapped while this process's reader or writer may still be in it; release unmaps it.
func (c *shmConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.sock.Close()
}

// release closes c and unmaps its segment; nothing may read or write c any more.
func (c *shmConn) release() {
	c.Close()
	unmap(c.seg)
	c.seg = nil
}

func (c *shmConn) LocalAddr() net.Addr  { return c.sock.LocalAddr() }
func (c *shmConn) RemoteAddr() net.Addr { return c.sock.RemoteAddr() }

// SetDeadline and its siblings do nothing: the mesh sets no deadline on a connection once it
// carries messages.
func (c *shmConn) SetDeadline(time.Time) error      { return nil }
func (c *shmConn) SetReadDeadline(time.Time) error  { return nil }
func (c *shmConn) SetWriteDeadline(time.Time) error { return nil }
