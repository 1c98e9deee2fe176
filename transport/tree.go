package transport

import (
	"errors"
	"fmt"
)

// The job's tree: a binary tree over the ranks, rank r's parent being (r-1)/2 and its
// children 2r+1 and 2r+2. The start connects every process with its neighbours in it (both
// connections of each pair), so every process is watched by at least one other (the
// heartbeats of its connections, liveness.go) whatever it exchanges otherwise, and what the
// whole job must learn travels along it: a lost process (spreadLoss), a failure at the end
// (FinalBarrier), the barriers' reduction and release (barrier.go). A process sends such
// news once, on its Requester-role connection to every peer it is connected with (its
// neighbours in the tree and those it exchanges messages with), and forwards what it
// receives only when it is news to it: O(connections) messages per process for each, at a
// depth of log2(Size) hops. When a process is lost, every part of the tree cut off by its
// loss holds one of its neighbours, which finds the loss itself.

// parent returns the parent of rank r in the job's tree, -1 for the root.
func parent(r int) int {
	if r == 0 {
		return -1
	}
	return (r - 1) / 2
}

// children returns the children of this process in the job's tree.
func (m *Mesh) children() []int {
	var c []int
	for _, k := range []int{2*m.rank + 1, 2*m.rank + 2} {
		if k < m.size {
			c = append(c, k)
		}
	}
	return c
}

// treeNeighbours returns this process's parent (when it has one) and children.
func (m *Mesh) treeNeighbours() []int {
	n := m.children()
	if p := parent(m.rank); p >= 0 {
		n = append(n, p)
	}
	return n
}

// spread sends the mesh message h to every peer this process wants a Requester-role
// connection with (its neighbours in the tree among them), except rank except; a peer that
// is lost is skipped. It only queues, so it may be called with markMu held.
func (m *Mesh) spread(h Header, except int) {
	for j := range m.peers {
		p := &m.peers[j]
		if j == m.rank || j == except || p.err.Load() != nil {
			continue
		}
		p.mu.Lock()
		wanted := p.wanted
		p.mu.Unlock()
		if wanted {
			m.send(j, Requester, outMsg{h: h}, queued) // a failure is the peer's loss, found by itself
		}
	}
}

// lostClosed is TypeLost's flag: the lost process closed its mesh (without its final
// barrier), having passed Seq barriers.
const lostClosed = 1

// spreadLoss tells the peers that rank is lost, for cause (see TypeLost).
func (m *Mesh) spreadLoss(rank int, cause error) {
	h := Header{Type: TypeLost, Arg: int64(rank), Key: uint32(m.rank)}
	if errors.Is(cause, ErrPeerClosed) {
		h.Flags, h.Seq = lostClosed, m.peers[rank].byeSeq.Load()
	}
	m.spread(h, rank)
}

// lostReport takes from's report that a process is lost (TypeLost h): when it is news, the
// process is lost here too (and the report goes on, see lose). A report that names this
// process is dropped: the reporter has closed its connections with it, which this process
// finds itself.
func (m *Mesh) lostReport(from int, h *Header) {
	rank, by := int(h.Arg), int(h.Key)
	if rank < 0 || rank >= m.size || rank == m.rank || m.peers[rank].err.Load() != nil {
		return
	}
	via := ""
	if by != from {
		via = fmt.Sprintf(", reported by rank %d", from)
	}
	cause := fmt.Errorf("rank %d found it lost%s", by, via)
	if h.Flags&lostClosed != 0 {
		cause = fmt.Errorf("%w (rank %d saw it%s)", ErrPeerClosed, by, via)
		m.farewell(rank, h.Seq, false) // passed on with the loss
	}
	m.lose(rank, cause)
}

// failedReport takes from's report that process rank entered FinalBarrier saying it
// failed: when it is news, it is recorded (every barrier fails from now on, naming it, and
// the process's loss is harmless) and goes on.
func (m *Mesh) failedReport(from int, h *Header) {
	rank := int(h.Arg)
	if rank < 0 || rank >= m.size {
		return
	}
	m.markMu.Lock()
	defer m.markMu.Unlock()
	if !m.peers[rank].failed {
		// The report goes on in the same hold of markMu as this process's barriers learn
		// it: a FinalBarrier that returns the failure may be followed at once by Close, and
		// a report queued after the goodbye would never reach the processes beyond.
		m.spread(*h, from)
		m.recordFailure(rank, h.Seq)
	}
}

// recordFailure records that rank failed after passing seq barriers; markMu held.
func (m *Mesh) recordFailure(rank int, seq uint64) {
	p := &m.peers[rank]
	p.final, p.failed = true, true
	if m.coll.failed < 0 {
		m.coll.failed, m.coll.failedSeq = rank, seq
	}
	m.wakeBarrier()
}
