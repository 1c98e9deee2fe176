package transport

import (
	"errors"
	"fmt"
	"time"
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

// spreadLoss tells the peers that rank is lost, for cause (see TypeLost), naming the process
// that found it lost: this one, or the one a report named (foundBy).
func (m *Mesh) spreadLoss(rank int, cause error) {
	by := m.rank
	var found *foundBy
	if errors.As(cause, &found) {
		by = found.rank
	}
	h := Header{Type: TypeLost, Arg: int64(rank), Key: uint32(by)}
	if errors.Is(cause, ErrPeerClosed) {
		h.Flags, h.Seq = lostClosed, m.peers[rank].byeSeq.Load()
	}
	m.spread(h, rank)
}

// lostReport takes from's report that a process is lost (TypeLost h): when it is news, the
// process is lost here too (and the report goes on, see lose), and hears it first (tellLost).
// A report that names this process comes from a peer about to close its connections with
// it, which this process finds itself: it keeps who found it lost, for the errors of the
// peers it loses (lostError).
func (m *Mesh) lostReport(from int, h *Header) {
	rank, by := int(h.Arg), int(h.Key)
	via := ""
	if by != from {
		via = fmt.Sprintf(", reported by rank %d", from)
	}
	if rank == m.rank && by >= 0 && by < m.size && h.Flags&lostClosed == 0 {
		note := fmt.Sprintf("(rank %d found this process, rank %d, lost%s: the processes that heard it ended their connections with it)", by, m.rank, via)
		m.foundLost.CompareAndSwap(nil, &note)
		return
	}
	if rank < 0 || rank >= m.size || rank == m.rank || m.peers[rank].err.Load() != nil {
		return
	}
	var cause error = &foundBy{rank: by, via: via}
	if h.Flags&lostClosed != 0 {
		cause = fmt.Errorf("%w (rank %d saw it%s)", ErrPeerClosed, by, via)
		m.farewell(rank, h.Seq, false) // passed on with the loss
	} else {
		m.tellLost(rank, h) // a process that closed its mesh needs no telling
	}
	m.lose(rank, cause)
}

// foundBy is the cause of a loss that a peer reported: process rank found it lost; via
// says which peer reported it, when another.
type foundBy struct {
	rank int
	via  string
}

func (e *foundBy) Error() string { return fmt.Sprintf("rank %d found it lost%s", e.rank, e.via) }

// tellLost writes the report h that rank is lost to rank itself, on each of its
// connections, before lose ends them: the messages before a connection's end are read
// before its end is seen, so rank learns who found it lost whichever connection ends first.
// It never waits for rank, which may not read any more: into a ring's room when there is
// some (its reader reads the ring before it sees the end), on a socket within tellLostWait;
// otherwise the report is dropped with the connection. It only explains.
func (m *Mesh) tellLost(rank int, h *Header) {
	for i := range m.peers[rank].conns {
		c := m.peers[rank].conns[i].Load()
		switch {
		case c == nil:
		case c.shm != nil:
			c.enqueue(outMsg{h: *h}, ahead)
		default:
			c.w.nc.SetWriteDeadline(time.Now().Add(tellLostWait)) // the connection ends next
			c.enqueue(outMsg{h: *h}, direct)
		}
	}
}

// tellLostWait bounds the write of tellLost's report on a socket.
const tellLostWait = 100 * time.Millisecond

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
