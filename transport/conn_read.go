package transport

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/orwl-go/orwl/internal/release"
)

// The reading half of a connection (conn.go holds the writing half): its reader goroutine,
// or a polling task, takes each message from the socket or the shared-memory ring, lets the
// Handler's Sink place its payload, and hands it to Handle, or to the mesh's own dispatch.

// readLoop reads messages until the connection ends.
func (c *conn) readLoop() {
	defer c.m.conns.Done()
	defer c.shutdown()
	for {
		if err := c.next(); err != nil {
			c.readFailed(err)
			return
		}
	}
}

// readFailed reports the error that ended the reading of the connection.
func (c *conn) readFailed(err error) {
	if errors.Is(err, errClosed) {
		if !c.bye.Load() {
			c.fail("reading", errors.New("closed by the peer without a goodbye"))
		}
		return
	}
	var fe *FrameError
	if errors.As(err, &fe) {
		c.m.log.Warn("rejected message", "peer", c.peer, "conn", c.role, "err", err)
	}
	c.fail("reading", err)
}

// readMessage reads one message and delivers it: a mesh message to the mesh, any other to
// the Handler, its payload streamed into the buffer Sink gives. frame, size and inRing are
// what ringFrame returned: with inRing, the message is the frame read in place in the ring;
// else it is read through the buffers.
//
// A message read in place has come whole, in one small frame: nothing of it is arriving
// any more (receiving, sinking), and its read moves the ring's position (received), so it
// costs no atomic write of the connection's.
func (c *conn) readMessage(frame []byte, size int, inRing bool) error {
	var p []byte
	var err error
	if inRing {
		p, _, err = openMessage(&c.rh, frame, opBinary, true, int64(len(frame)), c.sink)
		c.shm.in.consume(size)
	} else {
		p, err = c.w.readMessage(&c.rh, c.sinkArriving)
		if c.receiving.Load() {
			c.receiving.Store(false)
		}
	}
	if err != nil {
		return c.frameError(err)
	}
	if c.rh.Type < TypeUser {
		c.meshMessage(&c.rh)
		return nil
	}
	c.m.peers[c.peer].heard()
	c.m.h.Handle(c.peer, &c.rh, p)
	return nil
}

// next reads the next message and delivers it: at once from a socket; from shared memory
// once some of it has come, unless a task reads it meanwhile (readWaiting).
func (c *conn) next() error {
	if c.shm == nil {
		return c.readMessage(nil, 0, false)
	}
	for {
		if !c.reading.CompareAndSwap(false, true) {
			runtime.Gosched() // a task reads
			continue
		}
		if c.w.buffered() == 0 && c.shm.drained() {
			release.Bool(&c.reading, false)
			if err := c.shm.await(c.pending.Load); err != nil {
				return err
			}
			continue
		}
		err := c.readMessage(c.ringFrame())
		idle := !c.readDone()
		if err == nil && idle {
			// The reader would yield anyway as it polls for the next message; the
			// goroutine that Handle has woken, a task granted perhaps, runs now rather
			// than after the reader has gone down to the ring and back.
			runtime.Gosched()
		}
		return err
	}
}

// readDone is readEnd that also reports whether bytes wait to be read.
func (c *conn) readDone() bool {
	waiting := c.w.buffered() > 0 || !c.shm.drained()
	c.readEnd()
	return waiting
}

// readEnd ends a read of a message through shared memory (c.reading held): it notes
// whether the read buffers still hold bytes, and lets the next reader in.
func (c *conn) readEnd() {
	more := c.w.buffered() > 0
	if c.pending.Load() != more { // mostly unchanged: no write to publish
		c.pending.Store(more)
	}
	release.Bool(&c.reading, false)
}

// waiting is what readWaiting found.
type waiting uint8

const (
	nothingWaits waiting = iota
	readHere             // a message was read and delivered by the caller
	leftToReader         // bytes wait that the connection's reader must read (or reads now)
)

// readWaiting reads a message that has arrived whole in shared memory, on the calling
// goroutine (a task that waits for one, see Poller.Poll), and says whether it did: only one
// of less than 64 KiB that fits in one frame, so that the caller never waits for the rest of
// a message; anything else is left to the reader. A message that breaks the rules ends the
// connection as it would in the reader.
func (c *conn) readWaiting() waiting {
	if c.stopped.Load() || !c.pending.Load() && !c.shm.in.arrived() {
		return nothingWaits
	}
	if !c.reading.CompareAndSwap(false, true) {
		return leftToReader
	}
	frame, size, inRing := c.ringFrame()
	if !inRing && !c.wholeBuffered() {
		release.Bool(&c.reading, false)
		return leftToReader
	}
	err := c.readMessage(frame, size, inRing)
	c.readEnd()
	if err != nil {
		c.readFailed(err)
		c.shutdown()
	}
	return readHere
}

// wholeBuffered reports whether the next message, which begins in the read buffer, has
// arrived whole (its rest in the ring's record at hand) and is one frame that wholeFrameAt
// takes; c.reading held.
func (c *conn) wholeBuffered() bool {
	inBuf := c.w.br.Buffered()
	if inBuf < 2 {
		return false
	}
	hdr, _ := c.w.br.Peek(min(inBuf, 4)) // Peek reads nothing
	rec, _ := c.shm.in.next()
	hl, n, ok := wholeFrameAt(hdr)
	return ok && c.w.buffered()+len(rec) >= hl+n
}

// ringFrame returns, when nothing waits in the read buffers and the shared-memory record at
// hand starts with a whole frame that wholeFrameAt takes, the frame's payload, read in place
// in the ring, and the bytes the frame takes there; ok is false otherwise, and the message
// is read through the buffers. c.reading held.
func (c *conn) ringFrame() (frame []byte, size int, ok bool) {
	if c.shm == nil || c.w.buffered() != 0 {
		return nil, 0, false
	}
	rec, _ := c.shm.in.next()
	hl, n, ok := wholeFrameAt(rec)
	if !ok || len(rec) < hl+n {
		return nil, 0, false
	}
	return rec[hl : hl+n], hl + n, true
}

// frameError makes a message that broke the rules a *FrameError; other errors are the
// connection's.
func (c *conn) frameError(err error) error {
	var re *ruleError
	if !errors.As(err, &re) {
		return err
	}
	fe := &FrameError{Rank: c.peer, Err: re.err, HasHeader: re.hasHeader}
	if re.hasHeader {
		fe.Header = c.rh
	}
	return fe
}

// sinkArriving is sink for a message whose payload is still arriving: meanwhile the mesh is
// receiving, and the peer counts as heard while Sink makes room for it (see heard).
func (c *conn) sinkArriving(h *Header) ([]byte, error) {
	c.receiving.Store(h.Type >= TypeUser)
	c.sinking.Store(true)
	buf, err := c.sink(h)
	c.sinking.Store(false)
	return buf, err
}

// sink returns the buffer the payload of h lands in: the Handler's, or the connection's own
// scratch buffer (when the payload is at most maxScratch bytes). Everything this process
// wrote to the peer before the peer sent the message happens before Sink (see Send).
func (c *conn) sink(h *Header) ([]byte, error) {
	c.m.peers[c.peer].heard()
	buf, err := c.m.h.Sink(c.peer, h)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrSinkRefused, err)
	case buf != nil && uint64(len(buf)) < h.Len:
		return nil, fmt.Errorf("%w: %d < %d", ErrSinkSize, len(buf), h.Len)
	case buf != nil:
		return buf[:h.Len], nil
	case h.Len > maxScratch:
		return nil, fmt.Errorf("%w: %d payload bytes and no destination for them (at most %d)", ErrFrameTooLarge, h.Len, maxScratch)
	}
	if uint64(cap(c.scratch)) < h.Len {
		c.scratch = make([]byte, h.Len)
	}
	return c.scratch[:h.Len], nil
}

// meshMessage handles a message of the mesh itself (no payload).
func (c *conn) meshMessage(h *Header) {
	switch h.Type {
	case TypeBarrier, TypeFinal:
		c.m.barrierMessage(c.peer, h)
	case TypeLost:
		c.m.lostReport(c.peer, h)
	case TypeBye:
		// The peer is gone once both its connections said goodbye: what it sent before (a
		// barrier marker, say) is delivered by then. The barriers it passed are over.
		c.bye.Store(true)
		c.m.farewell(c.peer, h.Seq, h.Flags&byeAgreed != 0)
		if other := c.m.peers[c.peer].conns[1-c.role].Load(); other != nil && other.bye.Load() {
			c.m.lose(c.peer, ErrPeerClosed)
		}
	}
}
