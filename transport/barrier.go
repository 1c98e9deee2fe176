package transport

import (
	"context"
	"errors"
	"fmt"
)

// Barriers in the job's tree (tree.go). A barrier has two parts. On the connections: each
// process sends a numbered marker on every Requester-role connection it has or waits for,
// after what it sent there before, and the peer acknowledges it once it has delivered
// everything before it (connections are FIFO). In the tree: a process whose markers are all
// acknowledged, and whose children say that their subtrees are too, tells its parent; when
// the root has heard from its children, it releases them, and each process releases its
// own. So when a process leaves a barrier, every process has entered it and every
// Requester-role message sent to this one before has been delivered; each process sends
// and receives O(connections) messages, at a depth of 2 log2(Size) hops.

// Kinds of barrier messages: TypeBarrier's and TypeFinal's Flags.
const (
	kindMark     = 0 // on a connection: the sender's messages before it are all out
	kindAck      = 1 // the answer to a marker: every message before it was delivered
	kindUp       = 2 // to the parent: the sender's subtree is through
	kindDown     = 3 // to a child: the barrier is over (TypeFinal: the job agreed)
	kindFinished = 4 // TypeBarrier, to a child: the barrier will not end, rank Arg has entered FinalBarrier
	kindFailed   = 4 // TypeFinal, spread: rank Arg entered FinalBarrier saying that it failed, after Seq barriers
)

// collective is what a process knows of the job's barriers and of its failures; markMu.
type collective struct {
	agreed     bool           // this process's FinalBarrier succeeded
	lost       *PeerLostError // the first loss reported to the Handler
	failed     int            // the first rank that said it failed, or -1
	failedSeq  uint64         // the barriers it had passed
	finishedBy int            // a rank in FinalBarrier that the parent said keeps barriers from ending, or -1
	down       uint64         // the last barrier the parent released, or a process passed
	finalDown  bool           // the parent said the job agreed
	finalUp    bool           // this process told its parent that its subtree agrees; barMu
	finalMarks []int          // the peers that got this process's final marker; barMu
}

func newCollective() collective { return collective{failed: -1, finishedBy: -1} }

// peerBarrier is what a peer said in the barriers; markMu.
type peerBarrier struct {
	ack      uint64 // the last of this process's barrier markers that it acknowledged
	ackFinal bool   // it acknowledged this process's final marker
	up       uint64 // the last barrier its subtree is through (a child)
	upFinal  bool   // its subtree agrees to end the job (a child)
	told     bool   // this process told it that its barrier will not end (a child)
}

// Barrier returns when every process of the job has called Barrier as many times as this
// one. When it returns, every Requester-role message sent by any process to this one before
// its Barrier call has been handed to Handle here (Owner-role messages are not ordered by
// it). Every process must take part: a lost process makes Barrier fail with its
// *PeerLostError, a process that entered FinalBarrier instead makes it fail with an error
// wrapping ErrPeerFinished, and ctx cancellation returns ctx.Err(); after any of these the
// job's barriers are out of step and the job should end (with FinalBarrier and Close).
// Barrier fails after FinalBarrier.
func (m *Mesh) Barrier(ctx context.Context) error {
	m.barMu.Lock()
	defer m.barMu.Unlock()
	if wait, err := m.barrierNeeded(); !wait {
		return err
	}
	if m.final {
		return errors.New("transport: Barrier after FinalBarrier")
	}
	m.barSeq++
	seq := m.barSeq
	marked, err := m.markConnections(Header{Type: TypeBarrier, Seq: seq})
	if err != nil {
		return err
	}
	kids, up := m.children(), false
	return m.awaitMarks(ctx, func() (bool, error) {
		c := &m.coll
		// Through, it is over whatever happens next (a peer that closes at once, say).
		through := m.through(marked, kids, func(b *peerBarrier) bool { return b.ack >= seq }, func(b *peerBarrier) bool { return b.up >= seq })
		if par := parent(m.rank); through && par >= 0 {
			if !up {
				up = true
				m.send(par, Requester, outMsg{h: Header{Type: TypeBarrier, Flags: kindUp, Seq: seq}}, queued)
			}
			through = c.down >= seq
		}
		if through {
			for _, k := range kids {
				m.send(k, Requester, outMsg{h: Header{Type: TypeBarrier, Flags: kindDown, Seq: seq}}, queued)
			}
			m.passed.Store(seq)
			return true, nil
		}
		if c.lost != nil {
			return false, fmt.Errorf("transport: barrier %d: %w", seq, c.lost)
		}
		if r := m.finisher(kids, seq); r >= 0 {
			m.tellFinished(kids, r)
			return false, fmt.Errorf("transport: barrier %d: rank %d: %w", seq, r, ErrPeerFinished)
		}
		return false, nil
	})
}

// finisher returns a process in FinalBarrier that keeps barrier seq from ending, or -1:
// one that failed before it, one the parent named, or a child whose subtree entered
// FinalBarrier before it.
func (m *Mesh) finisher(kids []int, seq uint64) int {
	c := &m.coll
	switch {
	case c.failed >= 0 && c.failedSeq < seq:
		return c.failed
	case c.finishedBy >= 0:
		return c.finishedBy
	}
	for _, k := range kids {
		if b := &m.peers[k].bar; b.upFinal && b.up < seq {
			return k
		}
	}
	return -1
}

// tellFinished tells the children that were not told that their barrier will not end,
// rank r having entered FinalBarrier; markMu held.
func (m *Mesh) tellFinished(kids []int, r int) {
	for _, k := range kids {
		if b := &m.peers[k].bar; !b.told {
			b.told = true
			m.send(k, Requester, outMsg{h: Header{Type: TypeBarrier, Flags: kindFinished, Arg: int64(r)}}, queued)
		}
	}
}

// through reports whether every peer of marked that is not lost acknowledged the marker
// (acked) and every child's subtree is through (up); markMu held.
func (m *Mesh) through(marked, kids []int, acked, up func(*peerBarrier) bool) bool {
	for _, j := range marked {
		if p := &m.peers[j]; p.err.Load() == nil && !acked(&p.bar) {
			return false
		}
	}
	for _, k := range kids {
		if !up(&m.peers[k].bar) {
			return false
		}
	}
	return true
}

// FinalBarrier is the agreement at the end of a job. It tells the job that this process is
// done, and whether it failed: a final marker on every Requester-role connection, after
// everything this process sent there before, and the tree's reduction (see Barrier); a
// failure is spread to every process instead. A process that failed returns at once: it
// has its own error, and the others learn of the failure. Otherwise FinalBarrier waits
// until every process of the job has entered it, and returns nil only when none said that
// it failed: then every process of the job has finished without failure, and every
// Requester-role message sent to this one before a peer's FinalBarrier has been handed to
// Handle here. It returns an error naming the rank when a process reported a failure
// (wrapping ErrPeerFailed), or was lost (its *PeerLostError) before this FinalBarrier
// succeeded other than by a clean Close after its own FinalBarrier: this process cannot
// confirm that the job succeeded.
//
// A process still waiting in a Barrier that this process will not reach gets an error
// wrapping ErrPeerFinished from it, so it can go on to its own FinalBarrier. After
// FinalBarrier, Send and Handler go on as before, Barrier fails, a second FinalBarrier waits
// for the same condition without telling the peers again, and the process should Close. It
// also fails with ctx.Err() when ctx ends first, and with ErrClosed after Close. With Size 1
// it returns nil at once.
func (m *Mesh) FinalBarrier(ctx context.Context, failed bool) error {
	m.barMu.Lock()
	defer m.barMu.Unlock()
	if wait, err := m.barrierNeeded(); !wait {
		return err
	}
	if !m.final {
		m.final = true
		if failed {
			m.markMu.Lock()
			m.recordFailure(m.rank, m.barSeq)
			m.markMu.Unlock()
			m.spread(Header{Type: TypeFinal, Flags: kindFailed, Arg: int64(m.rank), Seq: m.barSeq}, -1)
			return nil
		}
		marked, err := m.markConnections(Header{Type: TypeFinal})
		if err != nil {
			return err
		}
		m.coll.finalMarks = marked
	}
	if failed {
		return nil
	}
	kids := m.children()
	return m.awaitMarks(ctx, func() (bool, error) {
		c := &m.coll
		if c.agreed {
			return true, nil
		}
		for _, k := range kids {
			if m.peers[k].bar.up > m.barSeq { // a barrier this process will not reach
				m.tellFinished([]int{k}, m.rank)
			}
		}
		through := m.through(c.finalMarks, kids, func(b *peerBarrier) bool { return b.ackFinal }, func(b *peerBarrier) bool { return b.upFinal })
		if par := parent(m.rank); through && par >= 0 {
			if !c.finalUp {
				c.finalUp = true
				m.send(par, Requester, outMsg{h: Header{Type: TypeFinal, Flags: kindUp}}, queued)
			}
			through = c.finalDown
		}
		switch {
		case through:
			c.agreed = true
			for _, k := range kids {
				m.send(k, Requester, outMsg{h: Header{Type: TypeFinal, Flags: kindDown}}, queued)
			}
			return true, nil
		case c.failed >= 0 && c.failed != m.rank:
			return false, fmt.Errorf("transport: final barrier: rank %d: %w", c.failed, ErrPeerFailed)
		case c.lost != nil:
			return false, fmt.Errorf("transport: final barrier: rank %d cannot confirm the end of the job: %w", c.lost.Rank, c.lost)
		}
		if par := parent(m.rank); par >= 0 {
			// A parent sends its release before it closes; gone without it, it did not
			// agree, and whatever it learned did not reach this process.
			if lost := m.peers[par].err.Load(); lost != nil {
				return false, fmt.Errorf("transport: final barrier: rank %d cannot confirm the end of the job: %w", par, lost)
			}
		}
		return false, nil
	})
}

// barrierNeeded reports whether a barrier has peers to wait for, and ErrClosed after Close.
func (m *Mesh) barrierNeeded() (bool, error) {
	if m.closing.Load() && m.size > 1 {
		return false, ErrClosed
	}
	return m.size > 1, nil
}

// markConnections sends the marker h on the Requester-role connection to every peer this
// process has one with or waits for, and returns those peers. A peer that is lost is left to
// the wait that follows.
func (m *Mesh) markConnections(h Header) ([]int, error) {
	var marked []int
	for j := range m.peers {
		p := &m.peers[j]
		if j == m.rank {
			continue
		}
		p.mu.Lock()
		wanted := p.wanted
		p.mu.Unlock()
		if !wanted {
			continue
		}
		if err := m.send(j, Requester, outMsg{h: h}, queued); err != nil && !errors.Is(err, ErrPeerLost) {
			return nil, err
		}
		marked = append(marked, j)
	}
	return marked, nil
}

// awaitMarks waits until check, called with markMu held at first and again whenever a
// barrier message arrives, a connection comes or a peer is lost, reports done or fails; or
// ctx ends, or Close.
func (m *Mesh) awaitMarks(ctx context.Context, check func() (done bool, err error)) error {
	for {
		m.markMu.Lock()
		done, err := check()
		if done || err != nil {
			m.markMu.Unlock()
			return err
		}
		if m.markCh == nil {
			m.markCh = make(chan struct{})
		}
		ch := m.markCh
		m.markMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		}
	}
}

// wakeBarrier wakes the waits of awaitMarks; markMu held.
func (m *Mesh) wakeBarrier() {
	if m.markCh != nil {
		close(m.markCh)
		m.markCh = nil
	}
}

// released records that a process passed seq barriers (its goodbye said so): they are
// over for every process, as when the parent releases them.
func (m *Mesh) released(seq uint64) {
	m.markMu.Lock()
	if seq > m.coll.down {
		m.coll.down = seq
		m.wakeBarrier()
	}
	m.markMu.Unlock()
}

// barrierMessage takes a barrier message h (TypeBarrier or TypeFinal) from rank from: it
// answers a marker, records the rest, and wakes the barriers.
func (m *Mesh) barrierMessage(from int, h *Header) {
	final := h.Type == TypeFinal
	kind := h.Flags
	switch {
	case kind == kindMark:
		if final {
			m.markMu.Lock()
			m.peers[from].final = true
			m.wakeBarrier()
			m.markMu.Unlock()
		}
		// On the connection the marker came on: the peer dialed it.
		m.send(from, Owner, outMsg{h: Header{Type: h.Type, Flags: kindAck, Seq: h.Seq}}, queued)
		return
	case final && kind == kindFailed:
		m.failedReport(from, h)
		return
	}
	m.markMu.Lock()
	defer m.markMu.Unlock()
	b := &m.peers[from].bar
	switch {
	case kind == kindAck && final:
		b.ackFinal = true
	case kind == kindAck:
		b.ack = max(b.ack, h.Seq)
	case kind == kindUp && final:
		b.upFinal = true
	case kind == kindUp:
		b.up = max(b.up, h.Seq)
	case kind == kindDown && final:
		m.coll.finalDown = true
	case kind == kindDown:
		m.coll.down = max(m.coll.down, h.Seq)
	case kind == kindFinished && m.coll.finishedBy < 0 && h.Arg >= 0 && h.Arg < int64(m.size):
		m.coll.finishedBy = int(h.Arg)
	}
	m.wakeBarrier()
}
