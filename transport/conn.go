package transport

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one authenticated websocket to a peer: a writer goroutine that drains its queue,
// and a reader goroutine that hands every message to the Handler.
type conn struct {
	m    *Mesh
	peer int
	role Role  // the role of the messages this process sends on it
	w    *wire // written only by the writer goroutine, read only by the reader

	mu      sync.Mutex
	q       []outMsg
	qBytes  int // the payload bytes of q
	spare   []outMsg
	writing bool // the writer goroutine or a direct sender (enqueue) is writing on w
	closing bool // goodbye queued; no more messages
	wake    chan struct{}
	stop    chan struct{}
	stopped atomic.Bool
	bye     atomic.Bool // the peer said goodbye on this connection

	// quietEnd: Close found the peer quiet, so this connection is shut down as soon as its
	// writer is done (its goodbye written), without waiting for the peer's goodbye.
	quietEnd   atomic.Bool
	writerDone atomic.Bool

	// When bytes last arrived, payloads included: the reader counts its reads that bring
	// bytes (arrivals; see received), and heard stamps lastRecv with the time it first sees
	// the count changed, so that no read pays for the clock.
	arrivals atomic.Uint64
	seen     atomic.Uint64 // received() as heard last saw it
	lastRecv atomic.Int64  // Mesh.now()
	sinking  atomic.Bool   // the Handler's Sink makes room for a message that is arriving

	receiving atomic.Bool // the reader is reading a user message's payload (Mesh.Receiving)

	// In shared memory (shm not nil), a task that waits for a message may read it itself
	// (Poller.Poll): whoever reads a message holds reading, and the reading state below
	// (the wire's read buffers included) belongs to it.
	shm     *shmConn
	reading atomic.Bool
	pending atomic.Bool // the read buffers held bytes when the last read ended
	// flushDue says that SendAhead left work for Flush: messages queued, or a record written
	// into the ring while the peer's reader slept (enqueueMsg), which must be woken.
	flushDue atomic.Bool

	rh      Header // reader's current header
	scratch []byte // reader's payload buffer when Sink gives none
}

// outMsg is one queued message.
type outMsg struct {
	h Header
	p []byte
}

func newConn(m *Mesh, peer int, role Role, w *wire) *conn {
	c := &conn{m: m, peer: peer, role: role, w: w, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	c.lastRecv.Store(m.now())
	if role == Owner {
		// The dialer attaches its end once it has read this end's answer (shm.go), which
		// on a loaded host may take the rest of the handshake's time: its first heartbeat
		// is not due before.
		c.lastRecv.Add(int64(handshakeTimeout))
	}
	c.shm, _ = w.nc.(*shmConn)
	w.grow(func(r io.Reader) io.Reader { return &stampReader{r: r, c: c} })
	return c
}

// stampReader counts the reads that bring bytes: a peer that is sending, even one long
// payload, is alive (see heard).
type stampReader struct {
	r io.Reader
	c *conn
}

func (s *stampReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.c.arrivals.Add(1)
	}
	return n, err
}

// heard returns when bytes last arrived from the peer, as seen at time now: the time of the
// first call of heard after their arrival, which the heartbeat makes every period, so the
// stamp is late by one period at most. While the Handler's Sink makes room for a message
// (it may populate gigabytes of memory), the peer counts as heard now: the time is this
// process's, and the message's bytes wait for it.
func (c *conn) heard(now int64) int64 {
	if a := c.received(); c.seen.Swap(a) != a || c.sinking.Load() {
		c.lastRecv.Store(now)
	}
	return c.lastRecv.Load()
}

// received counts what has arrived: the reads that brought bytes and, through shared memory,
// the position of the reader in its ring, which a message read in place there moves
// (readMessage) without counting a read. Both only grow, so their sum changes when either
// does.
func (c *conn) received() uint64 {
	n := c.arrivals.Load()
	if c.shm != nil {
		n += c.shm.in.h.read.Load()
	}
	return n
}

// sendMode is how a message leaves: handed to the writer goroutine (queued), written by the
// caller when it can (direct, see SendNow), or left in the queue for the caller's next
// message on the connection (ahead, see SendAhead).
type sendMode uint8

const (
	queued sendMode = iota
	direct
	ahead
)

// enqueue queues o and sends the queue as mode says (see push).
func (c *conn) enqueue(o outMsg, mode sendMode) error { return c.enqueueMsg(&o.h, o.p, mode) }

// enqueueMsg queues the message of header h and payload p, setting h's Len to len(p), and
// sends the queue as mode says (see push). The header is copied once, into the queue. A
// small message sent directly or ahead on an idle connection through shared memory is not
// queued at all, but written from h into a ring record of its own, which never waits for
// the peer: sent directly, the peer's reader is woken at once when it sleeps; ahead, when it
// sleeps, by the connection's next write or flush, which the caller promises (see
// SendAhead), so that nothing but memory is written under the caller's locks. A message
// queued ahead leaves with that next write or flush too (flushDue).
func (c *conn) enqueueMsg(h *Header, p []byte, mode sendMode) error {
	h.Len = uint64(len(p))
	c.mu.Lock()
	if c.closing || c.stopped.Load() {
		c.mu.Unlock()
		return c.gone()
	}
	if mode != queued && len(c.q) == 0 && !c.writing && len(p) <= lockedMax && c.inPlace() {
		if rec := c.shm.out.reserve(frameSize(len(p))); rec != nil {
			err := c.commitRecord(rec, appendFrame(rec[:0], h, p), 1)
			switch {
			case err != nil && mode == ahead: // closed under way: its end is reported elsewhere, not under the caller's locks
				c.mu.Unlock()
				return c.gone()
			case err != nil:
			case mode == direct:
				if c.flushDue.Load() { // nothing queued: the wake-up below is theirs too
					c.flushDue.Store(false)
				}
				err = c.shm.wakePeer()
			case c.shm.readerSleeps():
				c.flushDue.Store(true)
			}
			return c.wroteLocked(err)
		}
	}
	c.q = append(c.q, outMsg{h: *h, p: p})
	c.qBytes += len(p)
	if mode == ahead && !c.flushDue.Load() {
		c.flushDue.Store(true)
	}
	return c.push(mode)
}

// flush sends what SendAhead left (flushDue) as mode says (see push): the queue, or else
// the wake-up of the peer's reader. With nothing left, it returns at once, nil unless the
// connection stopped.
func (c *conn) flush(mode sendMode) error {
	if !c.flushDue.Load() && !c.stopped.Load() {
		return nil
	}
	c.flushDue.Store(false) // before the look at the queue: what is queued later sets it again
	c.mu.Lock()
	if c.closing || c.stopped.Load() {
		c.mu.Unlock()
		return c.gone()
	}
	if len(c.q) == 0 {
		c.mu.Unlock()
		if c.shm != nil {
			if err := c.shm.wakePeer(); err != nil {
				return c.writeFailed(err)
			}
		}
		return nil
	}
	return c.push(mode)
}

// push sends the queue; c.mu held, and released. With direct, when nobody is writing and the
// queue is small, the caller writes it itself, at once and in one system call (see SendNow),
// still under c.mu when it fits in the shared-memory ring (fitsRing); otherwise it wakes the
// writer goroutine and yields its processor to it, so that the queue leaves before the caller
// goes on (see SendNow). queued wakes the writer goroutine; ahead leaves the queue as it is
// (see SendAhead).
func (c *conn) push(mode sendMode) error {
	if mode == direct && !c.writing && c.qBytes <= directMax {
		if c.fitsRing() {
			return c.writeLocked()
		}
		batch := c.take()
		c.mu.Unlock()
		return c.writeNow(batch)
	}
	c.mu.Unlock()
	if mode != ahead {
		c.notify()
	}
	if mode == direct {
		runtime.Gosched()
	}
	return nil
}

// take hands the queue to its writer, who holds the wire until it is done; c.mu held.
func (c *conn) take() []outMsg {
	batch := c.q
	c.q, c.qBytes = c.spare[:0], 0
	c.spare = nil
	c.writing = true
	return batch
}

// lockedMax is the most payload bytes that a queue may hold to be written under c.mu
// (fitsRing): their copy into the ring holds up the connection's other senders a moment.
const lockedMax = 4 << 10

// fitsRing reports whether the queue goes through shared memory, is small, and has room in
// the ring now: then its write never waits for the peer, and the caller may write it without
// handing the wire over (take, write), under c.mu. c.mu held, and nobody writing.
func (c *conn) fitsRing() bool {
	if c.shm == nil || c.qBytes > lockedMax {
		return false
	}
	n := uint64(c.qBytes + len(c.q)*(maxWSHeader+headerSize)) // the bytes of the frames, at most
	return c.shm.out.hasRoom(2*span(n) + 8)                   // see ringWriter.put
}

// writeLocked writes the queue, which fitsRing accepted, under c.mu, and releases c.mu.
func (c *conn) writeLocked() error {
	err := c.writeBatch(c.q)
	giveBack(c.q)
	c.q, c.qBytes = c.q[:0], 0
	return c.wroteLocked(err)
}

// wroteLocked ends a write under c.mu: it releases c.mu, and shuts the connection down when
// the write failed.
func (c *conn) wroteLocked(err error) error {
	c.mu.Unlock()
	if err != nil {
		return c.writeFailed(err)
	}
	return nil
}

// writeFailed ends the connection whose write failed with err, and returns the error of the
// write's Send.
func (c *conn) writeFailed(err error) error {
	c.fail("writing to", err)
	c.shutdown()
	return c.gone()
}

// giveBack drops the payloads of written messages, which are their callers' again; a header
// holds no pointer.
func giveBack(batch []outMsg) {
	for i := range batch {
		batch[i].p = nil
	}
}

// writeBatch writes batch out and flushes, publishing every message it has read (see Send).
func (c *conn) writeBatch(batch []outMsg) error {
	if c.inPlace() {
		if n := ringFrames(batch); n <= shmChunk {
			if rec := c.shm.out.reserve(n); rec != nil {
				b := rec[:0]
				for i := range batch {
					b = appendFrame(b, &batch[i].h, batch[i].p)
				}
				if err := c.commitRecord(rec, b, len(batch)); err != nil {
					return err
				}
				return c.shm.wakePeer()
			}
		}
	}
	p := &c.m.peers[c.peer]
	for i := range batch {
		if err := c.w.writeMessage(&batch[i].h, batch[i].p); err != nil {
			return err
		}
		// The payload was read, and the message's last bytes wait for the flush below
		// (wire.writeMessage): publish it before the peer can answer it, for the readers
		// of the answers.
		p.wrote(1)
	}
	return c.w.flush()
}

// inPlace reports whether messages may be written straight into the connection's ring
// records (writeBatch, enqueueMsg): it goes through shared memory, unmasked, and nothing
// waits in the wire's buffer. The writer alone may call it.
func (c *conn) inPlace() bool { return c.shm != nil && !c.w.masks && len(c.w.wbuf) == 0 }

// frameSize returns the bytes of the frame of a message of n payload bytes, in one frame.
func frameSize(n int) int { return wsHeaderSize(headerSize+n) + headerSize + n }

// ringFrames returns the bytes of the frames of batch, each message in one frame, or more
// than shmChunk when they do not fit in one ring record.
func ringFrames(batch []outMsg) int {
	n := 0
	for i := range batch {
		if len(batch[i].p) > shmChunk {
			return shmChunk + 1
		}
		n += frameSize(len(batch[i].p))
	}
	return n
}

// appendFrame appends the frame of a message, header h then payload p, unmasked, as
// shared memory carries it.
func appendFrame(b []byte, h *Header, p []byte) []byte {
	b = appendWSHeader(b, opBinary, true, headerSize+len(p), false)
	b = appendHeader(b, h)
	return append(b, p...)
}

// commitRecord publishes rec, a ring record that the out ring reserved and that frames,
// msgs messages, filled: straight into shared memory, with no copy through the wire's
// buffer, and as one write, which the peer reads whole. Every message is published before
// the record is (see writeBatch). The caller then wakes the peer's reader when it sleeps
// (shmConn.wakePeer).
func (c *conn) commitRecord(rec, frames []byte, msgs int) error {
	if c.shm.closed.Load() {
		return net.ErrClosed
	}
	if len(frames) != len(rec) {
		return fmt.Errorf("transport: %d bytes of frames for a ring record of %d", len(frames), len(rec))
	}
	c.m.peers[c.peer].wrote(msgs)
	c.shm.out.commit(len(rec))
	return nil
}

// writeNow writes batch on the caller's goroutine, which holds the wire.
func (c *conn) writeNow(batch []outMsg) error {
	more, closing, err := c.write(batch)
	if err != nil {
		return c.writeFailed(err)
	}
	if more || closing {
		c.notify() // what came while the wire was held
	}
	return nil
}

// write writes batch, which c.take handed over, and gives the wire back. It reports whether
// messages were queued meanwhile and whether the connection is closing.
func (c *conn) write(batch []outMsg) (more, closing bool, err error) {
	err = c.writeBatch(batch)
	giveBack(batch)
	c.mu.Lock()
	c.spare = batch[:0]
	c.writing = false
	more, closing = len(c.q) > 0, c.closing
	c.mu.Unlock()
	return more, closing, err
}

// notify wakes the writer, unless a wake-up is pending already.
func (c *conn) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// gone is the error of a Send on a connection that takes no more messages: the peer's loss,
// or ErrClosed after this process's own Close, or else the peer is closing its mesh: it
// said goodbye and closed this connection, but its goodbye on the other one (which makes it
// lost) has not been read yet.
func (c *conn) gone() error {
	if e := c.m.peers[c.peer].err.Load(); e != nil {
		return e
	}
	if c.m.closing.Load() {
		return ErrClosed
	}
	return c.m.lostError(c.peer, ErrPeerClosed)
}

// goodbye queues TypeBye (byeHeader: the barriers this process passed, and whether it
// agreed) and lets the writer finish with a close frame.
func (c *conn) goodbye() {
	bye := c.m.byeHeader()
	c.mu.Lock()
	if !c.closing {
		c.q = append(c.q, outMsg{h: bye})
		c.closing = true
	}
	c.mu.Unlock()
	c.notify()
}

// shutdown stops the writer and closes the socket, which ends the reader.
func (c *conn) shutdown() {
	if c.stopped.CompareAndSwap(false, true) {
		close(c.stop)
		c.w.nc.Close()
	}
}

func (c *conn) writeLoop() {
	defer c.m.conns.Done()
	defer c.writerEnds()
	w := c.w
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		c.mu.Lock()
		if c.writing { // a direct sender has the wire; it wakes us when it is done
			c.mu.Unlock()
			continue
		}
		batch := c.take()
		c.mu.Unlock()
		more, closing, err := c.write(batch)
		if err != nil {
			c.fail("writing to", err)
			c.shutdown()
			return
		}
		if closing && !more {
			// Everything including the goodbye is out: close this direction.
			if w.writeClose(closeNormal) == nil && w.flush() == nil {
				if tc, ok := w.nc.(interface{ CloseWrite() error }); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}

// writerEnds records that the writer is done, and shuts the connection down when Close
// found its peer quiet (see endQuiet).
func (c *conn) writerEnds() {
	c.writerDone.Store(true)
	if c.quietEnd.Load() {
		c.shutdown()
	}
}

// endQuiet shuts the connection down once its writer is done: the peer is quiet, and its
// goodbye is not waited for, but what this process queued (its final marker, its goodbye)
// is written first, on a socket within a heartbeat: a quiet peer (stopped, cut off) may read
// nothing more, and a write stuck on its full socket would hold Close for closeWait.
func (c *conn) endQuiet() {
	c.quietEnd.Store(true)
	if c.shm == nil {
		c.w.nc.SetWriteDeadline(time.Now().Add(c.m.cfg.Heartbeat))
	}
	if c.writerDone.Load() {
		c.shutdown()
	}
}

var (
	closeNormal          = []byte{0x03, 0xe8} // status 1000
	closePolicyViolation = []byte{0x03, 0xf0} // status 1008: a refused handshake
	closeTryAgain        = []byte{0x03, 0xf5} // status 1013: a handshake whose time ended
)

// fail reports the peer lost because the connection broke while doing what ("reading",
// "writing to"), unless the end was expected: this connection was shut down, this mesh is
// closing, or the peer said goodbye on it (the other connection's goodbye, or its
// heartbeat, then decides).
func (c *conn) fail(what string, err error) {
	if !c.stopped.Load() && !c.m.closing.Load() && !c.bye.Load() {
		c.m.lose(c.peer, fmt.Errorf("%s the %s connection: %w", what, c.role, err))
	}
}
