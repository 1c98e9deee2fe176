package orwl

import (
	"errors"
	"fmt"
	"sync"

	"github.com/orwl-go/orwl/checkpoint"
)

// Partner copies (checkpoint.go). Once the writer has written one of this process's pieces,
// it sends the piece to the partner: a ckptPiece message that opens the copy (its key and
// size), then its data in ckptData messages of at most partSize bytes, at most partsInFlight
// of them not yet acknowledged: the partner acknowledges each (ckptAck) once it has copied
// it, and the next leaves then. The piece thus never fills the connection that also carries
// the job's requests, grants and releases (a shared-memory ring of a few MiB, which a
// processor busy with a task drains only when the task lets the reader run): they leave
// between its parts. The partner copies the parts, as the restart's parts, into a buffer it
// keeps per piece from one checkpoint to the next (assembly), and its writer writes the
// piece from there; the buffer is free again once written, which the ckptStored answer
// follows, so the sender never opens the next checkpoint's copy of the piece before (it
// arms no checkpoint while it waits for that answer, checkpointer.held). A buffer found
// busy all the same is left to the writer and replaced.

// partsInFlight is the most messages of partner copies a process has sent and the partner
// has not acknowledged.
const partsInFlight = 2

// outbox is what this process still has to send of the partner copies of its pieces.
type outbox struct {
	mu       sync.Mutex
	queue    []outMsg // not sent yet, in order
	inFlight int      // sent, not acknowledged
}

// outMsg is a message of a partner copy: its payload is the piece's buffer, not copied.
type outMsg struct {
	m       ckptMsg
	payload []byte
}

// copyBuf is the buffer that partner copies of one piece arrive in.
type copyBuf struct {
	b    []byte
	busy bool // the writer has the copy in it to write; checkpointer.mu
}

// copyIn is the partner copy a process is receiving.
type copyIn struct {
	k   int
	key checkpoint.Key
	buf *copyBuf
	assembly
}

// assembly is a piece arriving in parts, in order, into buf, of the piece's size: at a
// restart (restore.go), or as a partner copy.
type assembly struct {
	from int    // the process that sends it
	buf  []byte // its content
	got  int64  // bytes received so far
}

// add copies part, at offset off of the piece, into place, and reports whether the piece is
// complete.
func (a *assembly) add(off int64, part []byte) (bool, error) {
	size := int64(len(a.buf))
	if off != a.got || int64(len(part)) > size-a.got || len(part) == 0 && size != 0 {
		return false, fmt.Errorf("%d bytes at offset %d, after %d of its %d", len(part), off, a.got, size)
	}
	a.got += int64(copy(a.buf[a.got:], part))
	return a.got == size, nil
}

// sendCopy queues the partner copy of p, a piece of this process, for process to, and sends
// what the window allows. p.data must not change until the partner has stored the copy.
func (c *checkpointer) sendCopy(to int, p pieceJob) {
	loc, _ := c.j.locIndex(Location{Task: p.key.Task, Name: p.key.Name}) // a state's is not used
	m, payload := pieceMsg(p.k, p.key, len(p.data), loc)
	o := &c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queue = append(o.queue, outMsg{m: m, payload: payload})
	for off := 0; off < len(p.data); off += partSize {
		part := p.data[off:min(off+partSize, len(p.data))]
		o.queue = append(o.queue, outMsg{m: ckptMsg{phase: ckptData, k: p.k, off: int64(off)}, payload: part})
	}
	c.pump(to)
}

// pump sends the queued messages of partner copies to process to while the window allows;
// out.mu held, so that they leave in order.
func (c *checkpointer) pump(to int) {
	o := &c.out
	for o.inFlight < partsInFlight && len(o.queue) > 0 {
		next := o.queue[0]
		o.queue[0] = outMsg{}
		o.queue = o.queue[1:]
		o.inFlight++
		c.send(to, next.m, next.payload)
	}
}

// acked takes the partner's acknowledgement of a message of a copy, and sends the next.
func (c *checkpointer) acked(from int) error {
	o := &c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if from != c.partner() || o.inFlight == 0 {
		return errors.New("an acknowledgement of a part of a checkpoint piece that was not sent to it")
	}
	o.inFlight--
	c.pump(from)
	return nil
}

// receiveCopy takes a message of the partner copy that process from sends (ckptPiece opens
// it, ckptData brings its parts), acknowledges it, and gives the writer the copy once
// complete. It runs on the connection's reader; payload is the mesh's memory.
func (c *checkpointer) receiveCopy(from int, m ckptMsg, payload []byte) error {
	var key checkpoint.Key
	size := 0
	if m.phase == ckptPiece {
		if int(m.loc) >= c.j.tasks*len(c.j.names) {
			return fmt.Errorf("checkpoint piece for location %d, which does not exist", m.loc)
		}
		var err error
		if key, size, err = pieceKey(m, payload, c.j.locationAt); err != nil {
			return err
		}
	}
	c.mu.Lock()
	in, done, err := c.takeCopy(from, m, key, size, payload)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.send(from, ckptMsg{phase: ckptAck}, nil)
	if done {
		p := pieceJob{k: in.k, key: in.key, data: in.assembly.buf, from: from, copy: in.buf}
		c.push(func() { c.writePiece(p) })
	}
	return nil
}

// takeCopy opens the copy that process from sends (key and size for ckptPiece) or adds a
// part to it; it returns the copy and whether it is complete. c.mu held.
func (c *checkpointer) takeCopy(from int, m ckptMsg, key checkpoint.Key, size int, payload []byte) (*copyIn, bool, error) {
	if c.in == nil {
		c.in, c.bufs = make(map[int]*copyIn), make(map[checkpoint.Key]*copyBuf)
	}
	in := c.in[from]
	if m.phase == ckptPiece {
		if in != nil {
			return nil, false, fmt.Errorf("checkpoint %d: piece %v opened before piece %v was complete", m.k, key, in.key)
		}
		b := c.bufs[key]
		if b == nil || b.busy || cap(b.b) < size {
			b = &copyBuf{b: make([]byte, size)}
			c.bufs[key] = b
		}
		in = &copyIn{k: m.k, key: key, buf: b, assembly: assembly{from: from, buf: b.b[:size]}}
		c.in[from] = in
	} else if in == nil || in.k != m.k {
		return nil, false, fmt.Errorf("checkpoint %d: a part of a piece that was not opened", m.k)
	} else if _, err := in.add(m.off, payload); err != nil {
		return nil, false, fmt.Errorf("checkpoint %d: piece %v: %w", m.k, in.key, err)
	}
	done := in.got == int64(len(in.assembly.buf))
	if done {
		in.buf.busy = true
		delete(c.in, from)
	}
	return in, done, nil
}
