package orwl

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/internal/hugemem"
	"github.com/orwl-go/orwl/transport"
)

// Each process's part in a checkpoint: the hold, the arm, the snapshots, and the dispatch
// of checkpoint messages (checkpoint.go has the overview).

// locationCkpt is a location's part in the checkpoints, under the location's mu.
type locationCkpt struct {
	rounds bool   // an iterative handle's request came (see queued.round)
	round  int    // the round whose first grant takes the armed checkpoint's snapshot; 0: none
	buf    []byte // the snapshot, reused from one checkpoint to the next
}

// keptState is a task's private state registered with Task.Keep.
type keptState struct {
	name string
	buf  []byte // the task's own memory
	// wire is the state's piece as it travels to the partner process, its name then its
	// copy of the armed checkpoint (snap), allocated and touched at the schedule and reused:
	// the copy at a checkpoint's iteration takes no page fault, and none is made to send it.
	wire, snap []byte
}

// maxSlack bounds checkpointer.slack: a checkpoint is taken at most this many iterations
// (plus 2) after it is started.
const maxSlack = 1 << 10

// firstWindow is what the hold of the first checkpoint is expected to last, before one was
// measured: the three exchanges, each a message that a connection's reader may have to wait
// for a busy processor to read (the Go scheduler preempts a running goroutine after 10 ms).
const firstWindow = 30 * time.Millisecond

// holdSlack is the slack of the hold of a checkpoint being prepared (now): enough
// iterations, at the pace the tasks enter them, to cover twice the time the hold is expected
// to last, so that no task waits; and at least checkpointer.slack, which doubles after a
// checkpoint at which a task waited all the same. It runs in handle.
func (c *checkpointer) holdSlack() int64 {
	now, entered := time.Now(), c.entered.Load()
	switch {
	case !c.prepared.IsZero() && entered > c.lastIter:
		c.perIter = now.Sub(c.prepared) / time.Duration(entered-c.lastIter)
	case c.prepared.IsZero() && c.began.Load() != 0 && entered > int64(c.start()):
		began := c.made.Add(time.Duration(c.began.Load()))
		c.perIter = now.Sub(began) / time.Duration(entered-int64(c.start()))
	}
	c.prepared, c.lastIter = now, entered
	window := c.window
	if window == 0 {
		window = firstWindow
	}
	return paceSlack(window, c.perIter, c.slack.Load())
}

// paceSlack is the slack that lets tasks entering an iteration every perIter (0: not known)
// run through twice window without waiting, at least least, and at most maxSlack.
func paceSlack(window, perIter time.Duration, least int64) int64 {
	slack := least
	if perIter > 0 {
		slack = max(slack, int64(min(2*window/perIter, maxSlack))+1)
	}
	return min(slack, maxSlack)
}

// enter is called by a task as it enters iteration iter: it waits while iter is past the
// hold of a checkpoint being prepared, and copies the task's kept states for an armed one.
func (c *checkpointer) enter(ctx context.Context, t *Task, iter int) error {
	for {
		e := c.entered.Load()
		if int64(iter) <= e || c.entered.CompareAndSwap(e, int64(iter)) {
			break
		}
	}
	if c.began.Load() == 0 {
		c.began.CompareAndSwap(0, max(1, int64(time.Since(c.made))))
	}
	var held time.Time // when the task was first held up at this iteration
	if int64(iter) > c.hold.Load() {
		held = time.Now()
		c.waited.Store(true)
	}
	for int64(iter) > c.hold.Load() {
		c.mu.Lock()
		lifted := c.lifted
		c.mu.Unlock()
		if int64(iter) <= c.hold.Load() {
			break
		}
		select {
		case <-lifted:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if k := c.armed.Load(); k != 0 && int(k) == iter {
		if held.IsZero() {
			held = time.Now()
		}
		t.ckpt.entered++
		for i := range t.ckpt.kept {
			s := &t.ckpt.kept[i]
			if len(s.snap) != len(s.buf) { // not allocated at the schedule
				s.wire = append([]byte(s.name), s.buf...)
				s.snap = s.wire[len(s.name):]
			}
			copy(s.snap, s.buf)
			p := pieceJob{k: iter, key: checkpoint.StateKey(t.id, s.name), data: s.snap, wire: s.wire, from: -1}
			c.push(func() { c.writePiece(p) })
		}
		t.paid()
	}
	if !held.IsZero() {
		t.ckpt.held += time.Since(held)
	}
	return nil
}

// paid records that t no longer owes a copy of its kept states to the armed checkpoint: it
// made it, or it left Iterate. The last of the process's tasks to pay after the go sends
// the process's ckptCopied.
func (t *Task) paid() {
	c := t.job.ckpt
	c.mu.Lock()
	k := 0
	if t.ckpt.owes {
		t.ckpt.owes = false
		if c.owing--; c.owing == 0 {
			k, c.copiedDue = c.copiedDue, 0
		}
	}
	c.mu.Unlock()
	if k != 0 {
		c.answer(c.j.rank, copiedMsg{k})
	}
}

// arm arms this process's locations and tasks for checkpoint k.
func (c *checkpointer) arm(k int) {
	expect := 0
	for _, t := range c.j.local {
		expect += len(t.ckpt.kept)
	}
	for _, l := range c.j.owned {
		if l != nil {
			expect++
		}
	}
	c.held.Add(int64(expect)) // zero before: rank 0 skips a checkpoint while it is not
	c.mu.Lock()
	c.k, c.expect, c.written, c.stored, c.failed = k, expect, nil, 0, false
	c.listed, c.copies = k, nil
	// A task leaving Iterate now pays under c.mu after this (Task.paid). One that owes a
	// copy already pays both at once.
	for _, t := range c.j.local {
		if len(t.ckpt.kept) > 0 && t.ckpt.iterating.Load() && !t.ckpt.owes {
			c.owing++
			t.ckpt.owes = true
		}
	}
	c.mu.Unlock()
	c.armed.Store(int64(k))
	for _, l := range c.j.owned {
		if l != nil {
			l.arm(k)
		}
	}
}

// arm arms l for checkpoint k: a location that no iterative handle uses never changes
// after the schedule, and is copied now.
func (l *location) arm(k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ckpt.round = k
	if !l.ckpt.rounds {
		l.snapshot()
	}
}

// snapshot copies l's data for the armed checkpoint and hands it to the writer; l.mu held.
func (l *location) snapshot() {
	k := l.ckpt.round
	l.ckpt.round = 0
	if cap(l.ckpt.buf) < len(l.data) { // resized since the schedule; no piece uses it (held)
		hugemem.Free(l.ckpt.buf)
		l.ckpt.buf = snapBytes(len(l.data))
	}
	l.ckpt.buf = append(l.ckpt.buf[:0], l.data...)
	p := pieceJob{k: k, key: checkpoint.LocationKey(l.id.Task, l.id.Name), data: l.ckpt.buf, from: -1}
	l.j.ckpt.push(func() { l.j.ckpt.writePiece(p) })
}

// allocate gives this process's locations and its tasks' kept states their snapshot
// buffers, at the schedule (after the restore, which may resize locations): touched now, so
// that copying a checkpoint into them takes no page fault on the iteration path (fresh
// memory costs about 2 ms per MiB to touch on a virtual machine), and on huge pages
// (snapBytes). A location resized later gets a larger buffer at its next snapshot. They
// are freed with the job's other buffers (freeSnapshots).
func (c *checkpointer) allocate() {
	if c == nil {
		return
	}
	for _, l := range c.j.owned {
		if l != nil {
			l.mu.Lock()
			l.ckpt.buf = snapBytes(len(l.data))[:0]
			l.mu.Unlock()
		}
	}
	for _, t := range c.j.local {
		for i := range t.ckpt.kept {
			s := &t.ckpt.kept[i]
			s.wire = snapBytes(len(s.name) + len(s.buf))
			copy(s.wire, s.name)
			s.snap = s.wire[len(s.name):]
		}
	}
}

// snapBytes returns n bytes for snapshots, whose pages are all mapped (written once): on
// huge pages when they are large (hugemem.AllocHuge). A checkpoint's copy finds its
// buffer's page translations long gone from the caches; on small pages, a copy of 8 MiB
// then took twice the time of a copy into a buffer just used (measured on a virtual
// machine, which walks the guest's page tables and the host's), on huge pages about the
// same. Give them back with hugemem.Free.
func snapBytes(n int) []byte {
	b := hugemem.AllocHuge(n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// freeSnapshots frees the snapshot buffers, once nothing can use them (job.freeBuffers).
func (c *checkpointer) freeSnapshots() {
	if c == nil {
		return
	}
	for _, l := range c.j.owned {
		if l != nil {
			hugemem.Free(l.ckpt.buf)
			l.ckpt.buf = nil
		}
	}
	for _, t := range c.j.local {
		for i := range t.ckpt.kept {
			s := &t.ckpt.kept[i]
			hugemem.Free(s.wire)
			s.wire, s.snap = nil, nil
		}
	}
}

// send sends m to rank to, or hands it to this process's own handler.
func (c *checkpointer) send(to int, m ckptMessage, payload []byte) {
	if to == c.j.rank {
		c.handle(to, m, payload)
		return
	}
	c.j.mesh.Send(to, transport.Requester, m.header(), payload) // a failure fails the job
}

// handle runs a checkpoint message of process from. It never blocks: it runs on a
// connection's reader.
func (c *checkpointer) handle(from int, m ckptMessage, payload []byte) {
	if isBroadcast(m) && !c.pass(from, m) {
		return
	}
	switch m := m.(type) {
	// The phases of a checkpoint, from rank 0 through the tree: this process's part.
	case prepareMsg:
		c.handlePrepare()
	case armMsg:
		c.handleArm(m)
	case goMsg:
		c.handleGo(m)
	case writeMsg:
		c.handleWrite(m)
	case commitMsg:
		c.handleCommit(m)
	case discardMsg:
		c.push(func() { c.store.Discard(m.k) })
	// Between partners: a piece to store, and the answer that it was.
	case ckptPieceMsg:
		c.handlePiece(from, m, payload)
	case storedMsg:
		c.handleStored(m)
	// A restart's messages.
	case inventoryMsg, restartPlanMsg, partMsg:
		c.restartMessage(from, m, payload)
	// The coordinator's inputs, on their way to rank 0.
	case reportMsg, armedMsg, copiedMsg, doneMsg, committedMsg: // the answers to rank 0, from a child in the tree
		c.answer(from, m)
	case warnMsg:
		c.toCoordinator(coordInput{kind: onWarn, from: from, msg: m, why: string(payload)})
	case iteratedMsg:
		c.toCoordinator(coordInput{kind: onIterated, from: from, msg: m})
	default:
		c.j.fail(fmt.Errorf("orwl: a checkpoint message of unknown phase %d from rank %d", m.header().Flags, from))
	}
}

// handlePrepare holds the tasks a slack of iterations ahead, and reports the hold, the
// least iteration a task is at, and whether a piece is still held by its partner.
func (c *checkpointer) handlePrepare() {
	bound := c.entered.Load() + c.holdSlack()
	c.hold.Store(bound)
	bound = max(bound, c.entered.Load()) // a task that entered meanwhile saw no hold
	r := reportMsg{bound: bound, minIter: c.minIter.Load()}
	if c.held.Load() > 0 {
		r.busy, r.firstBusy = 1, c.j.rank
	}
	c.answer(c.j.rank, r)
}

// handleArm arms checkpoint m.k and answers that it is armed.
func (c *checkpointer) handleArm(m armMsg) {
	c.armedAt = time.Now()
	c.arm(m.k)
	c.answer(c.j.rank, armedMsg(m))
}

// handleGo lifts the hold, and answers that the snapshots of checkpoint m.k (0: none) are
// copied if they are, else leaves the answer to the last copy.
func (c *checkpointer) handleGo(m goMsg) {
	if c.waited.Swap(false) { // let the tasks run further during the next exchanges
		c.slack.Store(min(2*c.slack.Load(), maxSlack))
	}
	c.window = max(time.Since(c.prepared), c.window*3/4) // forgets a slow one gently
	c.hold.Store(math.MaxInt64)
	c.mu.Lock()
	close(c.lifted)
	c.lifted = make(chan struct{})
	copied := m.k != 0 && c.owing == 0
	if m.k != 0 && !copied {
		c.copiedDue = m.k
	}
	c.mu.Unlock()
	if copied {
		c.answer(c.j.rank, copiedMsg(m))
	}
}

// handleWrite releases the pieces of checkpoint m.k to the writer; a process with none is
// done at once.
func (c *checkpointer) handleWrite(m writeMsg) {
	c.released.Store(int64(m.k))
	c.mu.Lock()
	empty := m.k == c.k && c.expect == 0
	c.mu.Unlock()
	if empty { // no piece here: done at once
		c.maybeDone()
	}
	c.nudge()
}

// handlePiece queues the piece that partner from sent for the writer, or fails the job if
// it names no location of the job or does not decode.
func (c *checkpointer) handlePiece(from int, m ckptPieceMsg, payload []byte) {
	if int(m.loc) >= c.j.tasks*len(c.j.names) {
		c.j.fail(fmt.Errorf("orwl: checkpoint piece from rank %d for location %d, which does not exist", from, m.loc))
		return
	}
	key, data, err := pieceKey(m, payload, c.j.locationAt)
	if err != nil {
		c.j.fail(fmt.Errorf("orwl: rank %d: %w", from, err))
		return
	}
	c.push(func() { c.writePiece(pieceJob{k: m.k, key: key, data: data, from: from, buf: payload}) })
}

// handleStored counts a piece the partner stored for checkpoint m.k.
func (c *checkpointer) handleStored(m storedMsg) {
	c.held.Add(-1) // the partner is done with the piece, whatever its checkpoint
	c.mu.Lock()
	if m.k == c.k { // not a late answer about a checkpoint already given up
		c.stored++
		c.failed = c.failed || m.failed
	}
	c.mu.Unlock()
	c.maybeDone()
}

// handleCommit commits this directory's part of checkpoint m.k, by the writer, and answers
// whether it could.
func (c *checkpointer) handleCommit(m commitMsg) {
	// Every piece of k is written and stored now (rank 0 commits once every process is
	// done): this directory's manifest lists those it holds, this process's and its
	// partner's copies, with the Summary of the whole checkpoint.
	c.mu.Lock()
	var pieces []checkpoint.PieceInfo
	err := fmt.Errorf("checkpoint %d: committed, and this process armed checkpoint %d last", m.k, c.listed)
	if c.listed == m.k {
		pieces, err = slices.Concat(c.written, c.copies), nil
	}
	c.mu.Unlock()
	c.push(func() {
		if err == nil {
			err = c.store.CommitPart(m.k, pieces, m.whole)
		}
		if err != nil {
			c.warn(m.k, err)
		}
		c.answer(c.j.rank, committedMsg{k: m.k, failed: err != nil})
	})
}
