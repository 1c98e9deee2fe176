package transport

import (
	"errors"
	"fmt"
	"time"
)

// lostError is the error of losing rank for cause. When this process was itself paused for
// longer than the peer timeout a short while ago, it says so, and when a peer told it that
// another found it lost (a partition between the two, say), it says who: its peers took it
// for lost, and whatever they did about it is why it lost them.
func (m *Mesh) lostError(rank int, cause error) *PeerLostError {
	if note := m.PauseNote(); note != "" {
		cause = fmt.Errorf("%w %s", cause, note)
	}
	if note := m.foundLost.Load(); note != nil {
		cause = fmt.Errorf("%w %s", cause, *note)
	}
	return &PeerLostError{Rank: rank, Err: cause}
}

// PauseNote says, in parentheses, that this process was itself paused a short while ago for
// longer than the peer timeout, so that its peers took it for lost; it is empty otherwise.
// An error that ends the job after such a pause should carry it.
func (m *Mesh) PauseNote() string {
	now := m.now()
	if last := m.lastBeat.Load(); last != 0 && now-last > int64(m.pauseThreshold()) {
		// Paused, and noticed here before the heartbeat loop did.
		m.resumedAt.Store(now)
		m.pausedFor.Store(now - last)
	}
	recent := time.Duration(now-m.resumedAt.Load()) < 2*m.cfg.PeerTimeout
	if d := time.Duration(m.pausedFor.Load()); recent && d > m.cfg.PeerTimeout {
		return fmt.Sprintf("(this process, rank %d, was itself paused for %v, longer than the peer timeout %v: its peers took it for lost)",
			m.rank, d.Round(time.Millisecond), m.cfg.PeerTimeout)
	}
	return ""
}

// heartbeatLoop calls beat every heartbeat period.
func (m *Mesh) heartbeatLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	last := m.now()
	m.lastBeat.Store(last)
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		now := m.now()
		m.beat(now, last)
		last = now
	}
}

// beat sends a heartbeat on every connection and loses the peers that have sent nothing for
// longer than PeerTimeout, at time now; last is the time of the previous beat. A beat that
// comes much later than the period means this process was paused (stopped, suspended,
// starved): its peers' silence is then counted from the moment it resumed, so a process
// never blames others for its own pause.
func (m *Mesh) beat(now, last int64) {
	m.lastBeat.Store(now)
	if gap := time.Duration(now - last); gap > m.pauseThreshold() {
		m.resumedAt.Store(now)
		m.pausedFor.Store(int64(gap))
		m.log.Warn("this process was paused; its peers get a new timeout", "paused", gap.Round(time.Millisecond))
	}
	since := m.resumedAt.Load()
	for j := range m.peers {
		p := &m.peers[j]
		if j == m.rank || p.err.Load() != nil {
			continue
		}
		for i := range p.conns {
			c := p.conns[i].Load()
			if c == nil {
				continue
			}
			if silent := time.Duration(now - max(c.heard(now), since)); silent > m.cfg.PeerTimeout {
				m.lose(j, fmt.Errorf("nothing received on the %s connection for %v (peer timeout %v)", c.role, silent.Round(time.Millisecond), m.cfg.PeerTimeout))
				break
			}
			c.enqueue(outMsg{h: Header{Type: TypeHeartbeat}}, queued)
		}
	}
}

// pauseThreshold is the gap between two heartbeat ticks that means this process was paused.
func (m *Mesh) pauseThreshold() time.Duration {
	return max(2*m.cfg.Heartbeat, m.cfg.PeerTimeout/2)
}

// goneQuiet reports whether rank has sent nothing for two heartbeat periods: a stopped or
// unreachable process, which will send no goodbye either.
func (m *Mesh) goneQuiet(rank int) bool {
	now := m.now()
	for i := range m.peers[rank].conns {
		if c := m.peers[rank].conns[i].Load(); c != nil && time.Duration(now-c.heard(now)) < 2*m.cfg.Heartbeat {
			return false
		}
	}
	return true
}

// byeAgreed is TypeBye's flag: the sender's FinalBarrier had succeeded (the job agreed).
const byeAgreed = 1

// byeHeader is this process's goodbye: the barriers it passed, and whether its
// FinalBarrier succeeded.
func (m *Mesh) byeHeader() Header {
	h := Header{Type: TypeBye, Seq: m.passed.Load()}
	m.markMu.Lock()
	if m.coll.agreed {
		h.Flags = byeAgreed
	}
	m.markMu.Unlock()
	return h
}

// farewell records what rank said as it closed its mesh (its goodbye, or its answer to a
// dial once its Close had begun): the barriers it passed, which are over, and whether its
// FinalBarrier had succeeded, after which its going is harmless.
func (m *Mesh) farewell(rank int, passed uint64, agreed bool) {
	m.peers[rank].byeSeq.Store(passed)
	m.markMu.Lock()
	m.peers[rank].agreed = m.peers[rank].agreed || agreed
	m.markMu.Unlock()
	m.released(passed)
}

// lose marks rank lost, closes its connections and reports it once; a peer that has
// finished (see below) goes without harm, and its going is only logged.
func (m *Mesh) lose(rank int, cause error) {
	p := &m.peers[rank]
	e := m.lostError(rank, cause)
	if !p.err.CompareAndSwap(nil, e) {
		return
	}
	close(p.gone)
	p.mu.Lock()
	p.pending = nil // dropped: never sent
	p.mu.Unlock()
	if !errors.Is(cause, ErrPeerClosed) {
		for i := range p.conns {
			if c := p.conns[i].Load(); c != nil {
				c.shutdown()
			}
		}
	}
	m.markMu.Lock()
	// A peer that finished goes without harm when it failed (its marker or the tree said
	// so), closed cleanly after its final marker (it had every marker: the job succeeded),
	// said in its goodbye that the job agreed (a peer it sent no final marker to, which
	// has not agreed yet, learns it so), or this process has agreed already. Otherwise it
	// died or was cut off before it could know the outcome: it is lost.
	finished := p.final && (p.failed || errors.Is(cause, ErrPeerClosed)) || p.agreed || m.coll.agreed
	report := !m.closing.Load() && m.up.Load() && !finished
	if report {
		// Spread as the barriers learn it (see failedReport): the processes it is not
		// connected to learn it through the tree.
		m.spreadLoss(rank, cause)
		if m.coll.lost == nil {
			m.coll.lost = e // every barrier fails from now on
		}
	}
	m.wakeBarrier()
	m.markMu.Unlock()
	switch {
	case m.closing.Load():
	case !m.up.Load():
		m.log.Debug("peer lost during the start", "peer", rank, "err", cause) // Start reports it
	case finished:
		m.log.Debug("peer gone after its final barrier", "peer", rank, "err", cause)
	default:
		if errors.Is(cause, ErrPeerClosed) {
			m.log.Debug("peer closed its mesh", "peer", rank)
		} else {
			m.log.Debug("peer lost", "peer", rank, "err", cause) // the handler reports it, once
		}
		m.h.PeerLost(rank, e)
	}
}
