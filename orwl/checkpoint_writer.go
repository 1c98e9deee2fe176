package orwl

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"github.com/orwl-go/orwl/checkpoint"
)

// The writer of checkpoints: pieces made durable, partner copies, a process's part done
// (checkpoint.go has the overview).

// pieceJob is a piece for the writer: this process's own (from -1), or a partner copy that
// process from sent.
type pieceJob struct {
	k    int
	key  checkpoint.Key
	data []byte
	wire []byte // a kept state's payload for the partner (keptState.wire); nil: build it
	from int
	buf  []byte // a partner copy's buffer (copyBuffer), given back once data is written
}

// push queues work for the writer (what touches the disk); it never blocks.
func (c *checkpointer) push(work func()) {
	c.mu.Lock()
	c.queue = append(c.queue, work)
	c.mu.Unlock()
	c.nudge()
}

// nudge wakes the writer: its queue grew, or the tasks' copies it waits for are done.
func (c *checkpointer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write does the queued work until ctx is done: making pieces durable (this process's own,
// then sent on to the partner, and the partner copies of others), committing checkpoints.
// It waits from the arm of a checkpoint until every task of the job has copied its kept
// states for it (released), so that those copies, the only part of a checkpoint the tasks
// wait for, run alone; while it has work, the process has a processor more (writerWorking).
func (c *checkpointer) write(ctx context.Context) {
	working := false
	defer func() {
		if working {
			writerWorking(false)
		}
	}()
	for {
		var q []func()
		c.mu.Lock()
		if c.released.Load() >= c.armed.Load() {
			q, c.queue = c.queue, nil
		}
		c.mu.Unlock()
		if len(q) > 0 {
			if !working {
				working = true
				writerWorking(true)
			}
			for _, work := range q {
				work()
			}
			continue
		}
		if working {
			working = false
			writerWorking(false)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
	}
}

// writerProcs counts the checkpoint writers of this process that have work, and holds the
// GOMAXPROCS they set.
var writerProcs struct {
	sync.Mutex
	working int
	raised  int // GOMAXPROCS as the first of them raised it
}

// writerWorking raises GOMAXPROCS by one when a writer of this process starts working while
// none was, and sets it back when the last one is done (unless it was changed meanwhile). A
// write, an fsync or a rename blocks in the kernel holding its processor until the Go
// runtime's monitor takes it back, 20 µs to 20 ms later; with one processor per process
// (placeOnCores, orwlrun), the tasks of the process, and their neighbours elsewhere, would wait
// that long, about 50 ms per checkpoint of a 2-process stencil that writes 8 MiB per process.
func writerWorking(on bool) {
	writerProcs.Lock()
	defer writerProcs.Unlock()
	switch {
	case on:
		writerProcs.working++
		if writerProcs.working == 1 {
			writerProcs.raised = runtime.GOMAXPROCS(0) + 1
			runtime.GOMAXPROCS(writerProcs.raised)
		}
	default:
		writerProcs.working--
		if writerProcs.working == 0 && runtime.GOMAXPROCS(0) == writerProcs.raised {
			runtime.GOMAXPROCS(writerProcs.raised - 1)
		}
	}
}

// writePiece writes one piece and does what follows: a partner copy is acknowledged to its
// sender; an own piece is sent to the partner, and the checkpoint reported done when all are.
// Either is listed for this directory's manifest. A piece small enough for the manifest
// (checkpoint.InlinePiece) is not written: this process's manifest and its partner's will
// hold it.
func (c *checkpointer) writePiece(p pieceJob) {
	inline := len(p.data) <= checkpoint.InlineMax
	var info checkpoint.PieceInfo
	var err error
	if inline {
		info, err = checkpoint.InlinePiece(p.key, p.data)
	} else {
		info, err = c.writeFile(p)
	}
	if err != nil {
		c.warn(p.k, err)
	}
	if p.from >= 0 {
		c.mu.Lock()
		c.spare = append(c.spare, p.buf)
		if p.k == c.listed && err == nil {
			c.copies = append(c.copies, info)
		}
		c.mu.Unlock()
		c.send(p.from, storedMsg{k: p.k, failed: err != nil}, nil)
		return
	}
	c.mu.Lock()
	if p.k == c.k { // not a piece of a checkpoint already given up
		c.failed = c.failed || err != nil
		if err == nil {
			c.written = append(c.written, info)
		}
	}
	c.mu.Unlock()
	if partner := c.partner(); partner >= 0 && err == nil {
		loc, _ := c.j.locIndex(Location{Task: p.key.Task, Name: p.key.Name}) // a state's is not used
		var m ckptPieceMsg
		var payload []byte
		if p.wire != nil { // the name and the data as pieceMsg makes them, with no copy
			m, _ = pieceMsg(p.k, p.key, nil, loc)
			payload = p.wire
		} else {
			m, payload = pieceMsg(p.k, p.key, p.data, loc)
		}
		c.send(partner, m, payload)
	} else {
		c.held.Add(-1) // not sent: its buffer is free
		c.mu.Lock()
		if p.k == c.k && err == nil {
			c.stored++ // no partner: one copy is all there is
		}
		c.mu.Unlock()
	}
	c.maybeDone()
}

// writeChunk is the most writeFile writes at once.
const writeChunk = 1 << 20

// chunkHook, when set (by a test), is called before writeFile writes each chunk of a piece;
// an error it returns fails the piece's write as the disk's would.
var chunkHook func(p pieceJob, chunk []byte) error

// writeFile writes p durably into this process's directory (checkpoint.Store.WritePiece), in
// large sequential writes of at most writeChunk bytes, letting the tasks run between them:
// with one processor per process (placeOnCores), a write of the whole piece, and its
// checksum, would hold the task of this process, and its neighbours, up for milliseconds.
func (c *checkpointer) writeFile(p pieceJob) (checkpoint.PieceInfo, error) {
	w, err := c.store.NewPiece(p.k, p.key)
	if err != nil {
		return checkpoint.PieceInfo{}, err
	}
	for data := p.data; len(data) > 0; {
		n := min(len(data), writeChunk)
		if chunkHook != nil {
			if err := chunkHook(p, data[:n]); err != nil {
				w.Abort()
				return checkpoint.PieceInfo{}, err
			}
		}
		if _, err := w.Write(data[:n]); err != nil {
			return checkpoint.PieceInfo{}, err
		}
		data = data[n:]
		runtime.Gosched()
	}
	return w.Finish()
}

// warn reports a piece or a commit of checkpoint k that failed to rank 0, which logs it
// (report): the job goes on. A process tells rank 0 of a full disk once.
func (c *checkpointer) warn(k int, err error) {
	full := errors.Is(err, checkpoint.ErrNoSpace)
	c.mu.Lock()
	tell := !full || !c.told
	c.told = c.told || full
	c.mu.Unlock()
	if tell {
		c.send(0, warnMsg{k: k, full: full}, []byte(err.Error()))
	}
}

// partner is the process that keeps copies of this one's pieces: the next rank; -1 alone.
func (c *checkpointer) partner() int {
	if c.j.procs == 1 {
		return -1
	}
	return (c.j.rank + 1) % c.j.procs
}

// maybeDone tells rank 0 that this process's part of the checkpoint is written (fsync'd)
// on two processes, or that it failed.
func (c *checkpointer) maybeDone() {
	c.mu.Lock()
	k, failed := c.k, c.failed
	done := k != 0 && (failed || len(c.written) == c.expect && c.stored == c.expect)
	pieces := c.written
	if done {
		c.k = 0
	}
	c.mu.Unlock()
	if !done {
		return
	}
	m := doneMsg{k: k, failed: failed}
	if !failed {
		m.wrote = checkpoint.Summarize(pieces)
	}
	c.answer(c.j.rank, m)
}

// copyBuffer returns the buffer a partner copy of n bytes (a ckptPiece's payload) lands in:
// the smallest spare one that is large enough, else a new one. It runs on a connection's
// reader.
func (c *checkpointer) copyBuffer(n uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for i, b := range c.spare {
		if uint64(cap(b)) >= n && (best < 0 || cap(b) < cap(c.spare[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]byte, n)
	}
	b := c.spare[best]
	c.spare = slices.Delete(c.spare, best, best+1)
	return b[:n]
}
