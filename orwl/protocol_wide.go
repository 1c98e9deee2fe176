package orwl

import (
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/transport"
)

// The job-wide part of the protocol (protocol.go has the grant's messages and the
// dispatch): the messages that the processes send each other along the job's tree
// (tree.go) rather than for one location, their dispatch (handleWide, sinkWide), and
// sendWide, which sends and counts them. With protocol.go and protocol_ckpt.go, the only
// code that builds or reads a header.

// The job-wide message types, after the grant's (protocol.go).
const (
	msgProblems   = msgPair + 1 + iota // problemsMsg: init-phase mistakes along the job's tree, at the schedule
	msgFail                            // failMsg: the sender's job failed
	msgStuck                           // stuckMsg: deadlock detection's reports and probes, along the job's tree
	msgTracePart                       // payload: the trace parts of the sender's subtree, to its parent at the end (trace.go)
	msgClock                           // clockMsg: a process to rank 0 and back, for the trace
	msgCheckpoint                      // ckptMessage: a step of a checkpoint or a restart, a form for each (ckptPrepare...)
)

// The flags of the job-wide messages: a bit means one thing per message type.
const (
	flagDeadlock  = 1 << iota // failMsg: the failure is a deadlock
	flagPeerLost              // failMsg: the failure is a lost process
	flagYields                // failMsg: the failure only says that a process closed its mesh or failed (job.fail)
	flagEverybody = 1         // problemsMsg: the whole job's mistakes, from the parent
)

// handleWide hands a job-wide message to its service (node.Handle).
func (n *node) handleWide(from int, h *transport.Header, payload []byte) error {
	n.wide.counts.count(h.Type, false)
	switch h.Type {
	case msgProblems:
		return n.problemsFrom(from, decodeProblems(h), payload)
	case msgFail:
		return n.peerFailed(from, decodeFailure(h), payload)
	case msgStuck:
		return n.stuck(from, decodeStuck(h), payload)
	case msgClock:
		n.clockMessage(from, decodeClock(h))
		return nil
	case msgCheckpoint:
		if n.j.ckpt == nil {
			return errors.New("a checkpoint message, and this job takes none")
		}
		n.j.ckpt.handle(from, decodeCkpt(h), payload)
		return nil
	case msgTracePart:
		return n.tracePart(from, payload)
	}
	return fmt.Errorf("unknown message type %d", h.Type)
}

// sinkWide is where a job-wide message's data lands (node.Sink): a checkpoint piece from a
// partner, in a buffer of the checkpointer; nil for the others.
func (n *node) sinkWide(h *transport.Header) []byte {
	if h.Type == msgCheckpoint && h.Flags == ckptPiece && n.j.ckpt != nil {
		return n.j.ckpt.copyBuffer(h.Len)
	}
	return nil
}

// problemsMsg carries init-phase mistakes along the job's tree at the schedule
// (node.exchangeProblems): those of the sender's subtree, to its parent, or, all, the whole
// job's, to its children; the payload is []rankProblems in JSON.
type problemsMsg struct{ all bool }

func (m *problemsMsg) header() transport.Header {
	return transport.Header{Type: msgProblems, Flags: flags(m.all, flagEverybody)}
}

func decodeProblems(h *transport.Header) problemsMsg {
	return problemsMsg{all: h.Flags&flagEverybody != 0}
}

// failMsg tells a neighbour in the job's tree that the job failed at process origin, which
// the sender found or was told (node.spreadFailure); the payload is the error's text as
// origin wrote it, and the flags keep what errors.Is finds in it.
type failMsg struct {
	origin                     int
	deadlock, peerLost, yields bool
}

func (m *failMsg) header() transport.Header {
	return transport.Header{Type: msgFail, Arg: int64(m.origin),
		Flags: flags(m.deadlock, flagDeadlock) | flags(m.peerLost, flagPeerLost) | flags(m.yields, flagYields)}
}

func decodeFailure(h *transport.Header) failMsg {
	return failMsg{origin: int(h.Arg), deadlock: h.Flags&flagDeadlock != 0, peerLost: h.Flags&flagPeerLost != 0,
		yields: h.Flags&flagYields != 0}
}

// stuckMsg is a message of the deadlock watch along the job's tree (deadlock_dist.go), in
// one of three forms: stuckUp, from a child to its parent, carries the reports of the stuck
// processes of the child's subtree that changed since it last sent them (the payload:
// []stuckEntry in JSON); stuckProbe, from a parent to its children, asks for the epochs of
// every process of their subtrees (probe: its number); stuckAnswers answers it (the payload:
// []stuckAnswer in JSON).
type stuckMsg struct {
	form  uint8
	probe uint64
}

// The forms of a stuckMsg.
const (
	stuckUp uint8 = iota
	stuckProbe
	stuckAnswers
)

func (m *stuckMsg) header() transport.Header {
	return transport.Header{Type: msgStuck, Flags: m.form, Seq: m.probe}
}

func decodeStuck(h *transport.Header) stuckMsg { return stuckMsg{form: h.Flags, probe: h.Seq} }

// clockMsg asks rank 0 for its wall clock (asked: the asker's, Unix ns); rank 0's answer adds
// its own.
type clockMsg struct{ asked, answer int64 }

func (m *clockMsg) header() transport.Header {
	return transport.Header{Type: msgClock, Arg: m.asked, Seq: uint64(m.answer)}
}

func decodeClock(h *transport.Header) clockMsg {
	return clockMsg{asked: h.Arg, answer: int64(h.Seq)}
}

// tracePartHeader is the header of the trace parts of a process's subtree (msgTracePart):
// the payload is all it carries.
func tracePartHeader() transport.Header { return transport.Header{Type: msgTracePart} }

// sendWide sends a job-wide message (one of the tree's, tree.go) to rank to, on the
// Requester-role connection, and counts it.
func (n *node) sendWide(to int, h transport.Header, payload []byte) error {
	n.wide.counts.count(h.Type, true)
	return n.mesh.Send(to, transport.Requester, h, payload)
}
