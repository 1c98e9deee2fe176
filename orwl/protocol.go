package orwl

import (
	"fmt"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// The ORWL protocol between the processes of a job: every message, its direction, and how
// it fills the transport's neutral header (Type, Flags, Key, ID, Seq, Arg) and payload. Nothing else in the package builds or reads a header.
//
// Requests, releases and write-back data travel on the requester's connection, in the
// order the requester's tasks made them (rule 14); grants, with the location's data, on the
// owner's, unmasked (see transport.Role).
const (
	msgRequest    = transport.TypeUser + iota // requestMsg: requester to owner
	msgGrant                                  // grantMsg: owner to requester
	msgRelease                                // releaseMsg: requester to owner
	msgProblems                               // payload: the sender's init-phase mistakes as text (empty when none), at the schedule
	msgFail                                   // failMsg: the sender's job failed
	msgStuck                                  // stuckMsg: a stuck process to rank 0, for deadlock detection
	msgTracePart                              // payload: the sender's trace part, to rank 0 at the end
	msgClock                                  // clockMsg: a process to rank 0 and back, for the trace
	msgCheckpoint                             // ckptMsg: a step of a checkpoint (checkpoint.go)
)

// Flags, by message. A bit means one thing per message type: flagRecycle, which only grants
// carry, has the bit of flagFailed, and flagDropped, which only releases carry, the bit of
// flagRefused.
const (
	flagWrite    = 1 << iota // requestMsg: a write
	flagInitial              // requestMsg: declared in the init phase, placed by the schedule
	flagData                 // grantMsg, releaseMsg: the payload is the location's data
	flagRefused              // grantMsg: the owner refused the request; the payload says why
	flagFailed               // releaseMsg: the access failed; the payload says why
	flagDeadlock             // failMsg: the failure is a deadlock
	flagPeerLost             // failMsg: the failure is a lost process
	flagMore                 // grantMsg: another grant of the same FIFO operation follows for this process

	flagRecycle = flagFailed  // grantMsg: the requester's copy is not read again before the data changes
	flagDropped = flagRefused // releaseMsg: the requester's mirror holds nothing any more
)

// flags is f when set, else 0.
func flags(set bool, f uint8) uint8 {
	if set {
		return f
	}
	return 0
}

// requestMsg asks the owner of location loc to place a request of ticket in its FIFO.
type requestMsg struct {
	loc     uint32
	ticket  uint64 // the requester's id of the ticket, dense and reused
	mode    fifo.Mode
	initial bool // declared in the init phase: the owner's schedule places it in order
	pos     int  // FIFO position (initial requests)
	task    int  // the requesting task
	round   int  // an iterative handle's round (checkpoint.go), -1 for others
}

func (m *requestMsg) header() transport.Header {
	return transport.Header{Type: msgRequest, Key: m.loc, ID: m.ticket, Seq: uint64(m.round + 1), Arg: int64(m.pos)<<32 | int64(uint32(m.task)),
		Flags: flags(m.mode == fifo.Write, flagWrite) | flags(m.initial, flagInitial)}
}

func decodeRequest(h *transport.Header) requestMsg {
	m := requestMsg{loc: h.Key, ticket: h.ID, mode: fifo.Read, initial: h.Flags&flagInitial != 0,
		pos: int(h.Arg >> 32), task: int(uint32(h.Arg)), round: int(h.Seq) - 1}
	if h.Flags&flagWrite != 0 {
		m.mode = fifo.Write
	}
	return m
}

// grantMsg tells the requester that ticket is granted: with the data when its mirror does not
// hold version yet (the payload), or that the owner refused the request (the payload says
// why). The grants of one FIFO operation for one process are sent one after another, all but
// the last with more set, and the requester delivers them together. The last may say
// recycle: the data changes before the requester's next grant, so its mirror may be given up
// (see remoteQueue).
type grantMsg struct {
	loc     uint32
	ticket  uint64
	version uint64       // the data's version
	flow    trace.FlowID // the trace flow of the release that caused the grant
	data    bool
	refused bool
	more    bool
	recycle bool
}

func (m *grantMsg) header() transport.Header {
	return transport.Header{Type: msgGrant, Key: m.loc, ID: m.ticket, Seq: m.version, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.refused, flagRefused) | flags(m.more, flagMore) | flags(m.recycle, flagRecycle)}
}

func decodeGrant(h *transport.Header) grantMsg {
	return grantMsg{loc: h.Key, ticket: h.ID, version: h.Seq, flow: trace.FlowID(h.Arg),
		data: h.Flags&flagData != 0, refused: h.Flags&flagRefused != 0, more: h.Flags&flagMore != 0,
		recycle: h.Flags&flagRecycle != 0}
}

// releaseMsg ends the access of ticket; a writer's release carries the data it leaves, and
// a failed access (a write section that failed) carries why, and hands nothing on. dropped
// says that the requester's mirror holds nothing from now on: its next grant brings the data.
// next, when not 0, is the ticket of the request of the handle's next round (rule 6), which
// the message carries instead of a requestMsg of its own: the same location, mode, task
// and position as ticket's, the round after its round; the owner places it first, then
// releases.
type releaseMsg struct {
	loc     uint32
	ticket  uint64
	next    uint64
	flow    trace.FlowID // the trace flow of the release, for the grant it causes
	data    bool
	failed  bool
	dropped bool
}

func (m *releaseMsg) header() transport.Header {
	return transport.Header{Type: msgRelease, Key: m.loc, ID: m.ticket, Seq: m.next, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.failed, flagFailed) | flags(m.dropped, flagDropped)}
}

func decodeRelease(h *transport.Header) releaseMsg {
	return releaseMsg{loc: h.Key, ticket: h.ID, next: h.Seq, flow: trace.FlowID(h.Arg), data: h.Flags&flagData != 0,
		failed: h.Flags&flagFailed != 0, dropped: h.Flags&flagDropped != 0}
}

// problemsHeader is the header of a process's init-phase mistakes (msgProblems), and
// tracePartHeader of its trace part (msgTracePart): the payload is all they carry.
func problemsHeader() transport.Header  { return transport.Header{Type: msgProblems} }
func tracePartHeader() transport.Header { return transport.Header{Type: msgTracePart} }

// failMsg tells every process that the sender's job failed; the payload is the error's text,
// and the flags keep what errors.Is finds in it.
type failMsg struct{ deadlock, peerLost bool }

func (m *failMsg) header() transport.Header {
	return transport.Header{Type: msgFail, Flags: flags(m.deadlock, flagDeadlock) | flags(m.peerLost, flagPeerLost)}
}

func decodeFailure(h *transport.Header) failMsg {
	return failMsg{deadlock: h.Flags&flagDeadlock != 0, peerLost: h.Flags&flagPeerLost != 0}
}

// stuckMsg reports to rank 0 that every task of the sender is blocked or done; the payload is a
// stuckReport in JSON.
type stuckMsg struct{ epoch uint64 } // the count of the sender's looks that saw something move

func (m *stuckMsg) header() transport.Header {
	return transport.Header{Type: msgStuck, Seq: m.epoch}
}

func decodeStuck(h *transport.Header) stuckMsg { return stuckMsg{epoch: h.Seq} }

// clockMsg asks rank 0 for its wall clock (asked: the asker's, Unix ns); rank 0's answer adds
// its own.
type clockMsg struct{ asked, answer int64 }

func (m *clockMsg) header() transport.Header {
	return transport.Header{Type: msgClock, Arg: m.asked, Seq: uint64(m.answer)}
}

func decodeClock(h *transport.Header) clockMsg {
	return clockMsg{asked: h.Arg, answer: int64(h.Seq)}
}

// The steps of a checkpoint (ckptMsg.phase): rank 0 to every process, and their answers.
const (
	ckptPrepare   uint8 = iota + 1 // hold the tasks; answered by ckptReport
	ckptReport                     // bound: the iteration the tasks are held at; minIter: the smallest Iterate n; busy: pieces of an earlier checkpoint held
	ckptArm                        // arm checkpoint k; answered by ckptArmed
	ckptArmed                      //
	ckptGo                         // lift the hold
	ckptPiece                      // to the partner: a piece of checkpoint k to keep; answered by ckptStored
	ckptStored                     // the partner stored a piece of k, or failed to
	ckptDone                       // to rank 0: the payload lists the pieces the sender wrote (JSON), or failed
	ckptCommit                     // commit k with the job's pieces (payload, JSON)
	ckptDiscard                    // give k up
	ckptInventory                  // at the start, to rank 0: what the sender's directories hold (payload, JSON)
	ckptPlan                       // rank 0 to every process: the checkpoint the job restarts from, who sends what (payload, JSON)
	ckptPart                       // a part of piece number loc of the plan, at offset off (restore.go)
	ckptCopied                     // to rank 0, after ckptGo of k: the tasks of the sender have copied their kept states
	ckptWrite                      // every process's tasks have copied theirs: write the pieces of k
	ckptWarn                       // to rank 0: a piece or a commit of k failed, failed: for a full disk; the payload says why
	ckptIterated                   // to rank 0, as its tasks end: a task of the sender ran Task.Iterate
)

// ckptMsg is one step of a checkpoint. A piece carries its key: the task in ID, a location's
// index in Key, or, for a task's kept state (Arg >= 0), its name as the payload's first Arg
// bytes.
type ckptMsg struct {
	phase   uint8
	k       int
	bound   int64
	minIter int64
	failed  bool
	busy    bool // ckptReport: the sender still holds buffers of an earlier checkpoint's pieces
	task    int
	loc     uint32
	state   int   // the length of a kept state's name; -1 for a location
	off     int64 // ckptPart: the offset of the payload in its piece
}

func (m *ckptMsg) header() transport.Header {
	h := transport.Header{Type: msgCheckpoint, Flags: m.phase, Seq: uint64(m.k), ID: uint64(m.task), Key: m.loc, Arg: int64(m.state)}
	switch m.phase {
	case ckptReport:
		h.Arg, h.ID, h.Key = m.bound, uint64(m.minIter), 0
		if m.busy {
			h.Key = 1
		}
	case ckptDone, ckptStored, ckptWarn:
		if m.failed {
			h.Arg = 1
		}
	case ckptPart:
		h.Arg = m.off
	}
	return h
}

func decodeCkpt(h *transport.Header) ckptMsg {
	m := ckptMsg{phase: h.Flags, k: int(h.Seq), task: int(h.ID), loc: h.Key, state: int(h.Arg)}
	switch m.phase {
	case ckptReport:
		m.bound, m.minIter, m.busy = h.Arg, int64(h.ID), h.Key == 1
	case ckptDone, ckptStored, ckptWarn:
		m.failed = h.Arg == 1
	case ckptPart:
		m.off = h.Arg
	}
	return m
}

// pieceMsg is the message that sends p, a piece of checkpoint k, to the partner, and its
// payload; loc is the location's index when p is a location's.
func pieceMsg(k int, key checkpoint.Key, data []byte, loc int) (ckptMsg, []byte) {
	m := ckptMsg{phase: ckptPiece, k: k, task: key.Task, loc: uint32(loc), state: -1}
	if key.Kind == checkpoint.State {
		m.state = len(key.Name)
		return m, append([]byte(key.Name), data...)
	}
	return m, data
}

// pieceKey reads the key of a piece m carries and returns its data, in payload; location
// names the location of an index.
func pieceKey(m ckptMsg, payload []byte, location func(uint32) Location) (checkpoint.Key, []byte, error) {
	if m.state < 0 {
		l := location(m.loc)
		return checkpoint.LocationKey(l.Task, l.Name), payload, nil
	}
	if m.state > len(payload) {
		return checkpoint.Key{}, nil, fmt.Errorf("checkpoint piece of %d bytes names a state of %d", len(payload), m.state)
	}
	return checkpoint.StateKey(m.task, string(payload[:m.state])), payload[m.state:], nil
}
