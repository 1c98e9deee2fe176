package transport

import (
	"context"
	"errors"
	"fmt"
)

// Barrier returns when every process of the job has called Barrier as many times as this
// one. Each process sends a numbered marker to every peer on its Requester-role connection
// and waits for the markers of all peers; since connections are FIFO, when Barrier returns
// every Requester-role message sent by any process before its Barrier call has been handed
// to Handle here (Owner-role messages are not ordered by it). Every process must take part:
// a lost peer makes Barrier fail with its *PeerLostError, a peer that entered FinalBarrier
// instead makes it fail with an error wrapping ErrPeerFinished, and ctx cancellation
// returns ctx.Err(); after any of these the job's barriers are out of step and the job
// should end (with FinalBarrier and Close). Barrier fails after FinalBarrier.
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
	if err := m.broadcastMarker(Header{Type: TypeBarrier, Seq: seq}); err != nil {
		return err
	}
	return m.awaitMarks(ctx, func() (bool, error) {
		waiting := false
		for j := 0; j < m.size; j++ {
			if j == m.rank || m.marks[j] >= seq {
				continue
			}
			waiting = true
			if e := m.peers[j].err.Load(); e != nil {
				return false, fmt.Errorf("transport: barrier %d: %w", seq, e)
			}
			if m.peers[j].final {
				// Its markers are all in (they precede the final one).
				return false, fmt.Errorf("transport: barrier %d: rank %d: %w", seq, j, ErrPeerFinished)
			}
		}
		return !waiting, nil
	})
}

// FinalBarrier is the agreement at the end of a job. It tells every peer that this process
// is done, and whether it failed (a final marker, sent once, on the Requester-role
// connection, after everything this process sent before). A process that failed returns at
// once: it has its own error, and its peers learn of the failure from its marker. Otherwise
// FinalBarrier waits for the final marker of every peer and returns nil only when every one
// arrived saying its process did not fail: then every process of the job has finished
// without failure, and every Requester-role message sent before a peer's FinalBarrier has
// been handed to Handle here. It returns an error naming the rank when a peer reported a
// failure (wrapping ErrPeerFailed), or was lost (its *PeerLostError) before its marker
// arrived or, having sent it, before this FinalBarrier succeeded other than by a clean
// Close (a peer that closes cleanly had every marker): this process cannot confirm that the
// job succeeded.
//
// A peer still waiting in a Barrier that this process will not reach gets an error
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
		h := Header{Type: TypeFinal, Seq: m.barSeq}
		if failed {
			h.Flags = finalFailed
		}
		if err := m.broadcastMarker(h); err != nil {
			return err
		}
	}
	if failed {
		return nil
	}
	return m.awaitMarks(ctx, func() (bool, error) {
		done := true
		for j := 0; j < m.size; j++ {
			p := &m.peers[j]
			switch {
			case j == m.rank:
			case p.final && p.failed:
				return false, fmt.Errorf("transport: final barrier: rank %d: %w", j, ErrPeerFailed)
			case p.err.Load() != nil && !(p.final && (m.agreed || errors.Is(p.err.Load(), ErrPeerClosed))):
				// lost before its marker, or after it but before this process agreed, and
				// not by a clean Close (see lose)
				return false, fmt.Errorf("transport: final barrier: rank %d cannot confirm the end of the job: %w", j, p.err.Load())
			case p.final:
			default:
				done = false
			}
		}
		m.agreed = done
		return done, nil
	})
}

// barrierNeeded reports whether a barrier has peers to wait for, and ErrClosed after Close.
func (m *Mesh) barrierNeeded() (bool, error) {
	if m.closing.Load() && m.size > 1 {
		return false, ErrClosed
	}
	return m.size > 1, nil
}

// broadcastMarker sends the marker h to every peer on the Requester-role connection. A peer
// that is lost is left to the wait that follows: it may have delivered its own marker
// already.
func (m *Mesh) broadcastMarker(h Header) error {
	for j := 0; j < m.size; j++ {
		if j == m.rank {
			continue
		}
		if err := m.send(j, Requester, outMsg{h: h}, queued); err != nil && !errors.Is(err, ErrPeerLost) {
			return err
		}
	}
	return nil
}

// awaitMarks waits until check, called with markMu held at first and again whenever a
// marker arrives or a peer is lost, reports done or fails; or ctx ends, or Close.
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

func (m *Mesh) mark(from int, seq uint64) {
	m.markMu.Lock()
	if seq > m.marks[from] {
		m.marks[from] = seq
	}
	m.wakeBarrier()
	m.markMu.Unlock()
}

// markFinal records that from has entered FinalBarrier, and whether it failed.
func (m *Mesh) markFinal(from int, failed bool) {
	m.markMu.Lock()
	p := &m.peers[from]
	p.final, p.failed = true, failed
	m.wakeBarrier()
	m.markMu.Unlock()
}
