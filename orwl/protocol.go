package orwl

import (
	"errors"
	"fmt"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// The ORWL protocol between the processes of a job: every message, its direction, how it
// fills the transport's neutral header (Type, Flags, Key, ID, Seq, Arg) and payload, and
// the dispatch of what arrives (node.Sink, node.Handle) to the decoded message's receiver.
// Nothing else in the package builds or reads a header: no other function takes a
// *transport.Header.
//
// Requests, releases and write-back data travel on the requester's connection, in the
// order the requester's tasks made them (rule 14); grants, with the location's data, on the
// owner's, unmasked (see transport.Role).
const (
	msgRequest    = transport.TypeUser + iota // requestMsg: requester to owner
	msgGrant                                  // grantMsg: owner to requester
	msgRelease                                // releaseMsg: requester to owner
	msgProblems                               // problemsMsg: init-phase mistakes along the job's tree, at the schedule
	msgFail                                   // failMsg: the sender's job failed
	msgStuck                                  // stuckMsg: deadlock detection's reports and probes, along the job's tree
	msgTracePart                              // payload: the trace parts of the sender's subtree, to its parent at the end (trace.go)
	msgClock                                  // clockMsg: a process to rank 0 and back, for the trace
	msgCheckpoint                             // ckptMessage: a step of a checkpoint or a restart, a form for each (ckptPrepare...)
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

	flagRecycle   = flagFailed  // grantMsg: the requester's copy is not read again before the data changes
	flagDropped   = flagRefused // releaseMsg: the requester's mirror holds nothing any more
	flagYields    = flagWrite   // failMsg: the failure only says that a process closed its mesh or failed (job.fail)
	flagEverybody = flagWrite   // problemsMsg: the whole job's mistakes, from the parent
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
	size    int // the payload's length, when decoded (the transport sets it on sending)
}

func (m *grantMsg) header() transport.Header {
	return transport.Header{Type: msgGrant, Key: m.loc, ID: m.ticket, Seq: m.version, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.refused, flagRefused) | flags(m.more, flagMore) | flags(m.recycle, flagRecycle)}
}

func decodeGrant(h *transport.Header) grantMsg {
	return grantMsg{loc: h.Key, ticket: h.ID, version: h.Seq, flow: trace.FlowID(h.Arg),
		data: h.Flags&flagData != 0, refused: h.Flags&flagRefused != 0, more: h.Flags&flagMore != 0,
		recycle: h.Flags&flagRecycle != 0, size: int(h.Len)}
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
	size    int // the payload's length, when decoded (the transport sets it on sending)
}

func (m *releaseMsg) header() transport.Header {
	return transport.Header{Type: msgRelease, Key: m.loc, ID: m.ticket, Seq: m.next, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.failed, flagFailed) | flags(m.dropped, flagDropped)}
}

func decodeRelease(h *transport.Header) releaseMsg {
	return releaseMsg{loc: h.Key, ticket: h.ID, next: h.Seq, flow: trace.FlowID(h.Arg), data: h.Flags&flagData != 0,
		failed: h.Flags&flagFailed != 0, dropped: h.Flags&flagDropped != 0, size: int(h.Len)}
}

// tracePartHeader is the header of the trace parts of a process's subtree (msgTracePart):
// the payload is all it carries.
func tracePartHeader() transport.Header { return transport.Header{Type: msgTracePart} }

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

// Sink implements transport.Handler: a grant's data lands in the mirror (requester), a
// write-back in the location (owner), a checkpoint piece from a partner in a buffer of the
// checkpointer.
func (n *node) Sink(from int, h *transport.Header) ([]byte, error) {
	switch h.Type {
	case msgGrant:
		return n.req.grantSink(from, decodeGrant(h))
	case msgRelease:
		return n.own.writeBackSink(from, decodeRelease(h))
	case msgCheckpoint:
		if h.Flags == ckptPiece && n.j.ckpt != nil {
			return n.j.ckpt.copyBuffer(h.Len), nil
		}
	}
	return nil, nil
}

// Handle implements transport.Handler: it decodes the message and hands it to its receiver.
// A request, a grant or a release counts for the deadlock watch as a move (detector.moved).
// A malformed message fails the job, naming the sender.
func (n *node) Handle(from int, h *transport.Header, payload []byte) {
	var err error
	n.wide.counts.count(h.Type, false)
	switch h.Type {
	case msgRequest:
		n.j.det.moved()
		err = n.own.place(from, decodeRequest(h))
	case msgGrant:
		n.j.det.moved()
		err = n.req.granted(from, decodeGrant(h), payload)
	case msgRelease:
		n.j.det.moved()
		err = n.own.released(from, decodeRelease(h), payload)
	case msgProblems:
		err = n.problemsFrom(from, decodeProblems(h), payload)
	case msgFail:
		err = n.peerFailed(from, decodeFailure(h), payload)
	case msgStuck:
		err = n.stuck(from, decodeStuck(h), payload)
	case msgClock:
		n.clockMessage(from, decodeClock(h))
	case msgCheckpoint:
		if n.j.ckpt == nil {
			err = errors.New("a checkpoint message, and this job takes none")
		} else {
			n.j.ckpt.handle(from, decodeCkpt(h), payload)
		}
	case msgTracePart:
		err = n.tracePart(from, payload)
	default:
		err = fmt.Errorf("unknown message type %d", h.Type)
	}
	if err != nil {
		n.j.fail(fmt.Errorf("orwl: protocol error from rank %d: %w", from, err))
	}
}

// sendWide sends a job-wide message (one of the tree's, tree.go) to rank to, on the
// Requester-role connection, and counts it.
func (n *node) sendWide(to int, h transport.Header, payload []byte) error {
	n.wide.counts.count(h.Type, true)
	return n.mesh.Send(to, transport.Requester, h, payload)
}

// The steps of a checkpoint and of a restart: the Flags of a msgCheckpoint, each with a
// message form of its own below (the Seq of every form that has one is the checkpoint's
// number k). checkpoint.go describes the checkpoint's exchanges, restore.go the restart's.
const (
	ckptPrepare   uint8 = iota + 1 // prepareMsg: rank 0 to every process, along the job's tree (checkpoint_tree.go)
	ckptReport                     // reportMsg: the answer to prepareMsg, up the tree
	ckptArm                        // armMsg: rank 0 to every process, along the tree
	ckptArmed                      // armedMsg: the answer to armMsg, up the tree
	ckptGo                         // goMsg: rank 0 to every process, along the tree
	ckptPiece                      // ckptPieceMsg: to the partner
	ckptStored                     // storedMsg: the partner's answer to ckptPieceMsg
	ckptDone                       // doneMsg: to rank 0, up the tree
	ckptCommit                     // commitMsg: rank 0 to every process, along the tree
	ckptDiscard                    // discardMsg: rank 0 to every process, along the tree
	ckptInventory                  // inventoryMsg: at the start, to rank 0
	ckptPlan                       // restartPlanMsg: rank 0 to every process, at the start
	ckptPart                       // partMsg: at the start, to the process that runs the piece's task
	ckptCopied                     // copiedMsg: to rank 0, up the tree
	ckptWrite                      // writeMsg: rank 0 to every process, along the tree
	ckptWarn                       // warnMsg: to rank 0
	ckptIterated                   // iteratedMsg: to rank 0, as the sender's tasks end
	ckptCommitted                  // committedMsg: the answer to commitMsg, up the tree
)

// ckptMessage is a message of a checkpoint or a restart, one of the forms below; decodeCkpt
// reads one.
type ckptMessage interface {
	header() transport.Header
}

type (
	// prepareMsg asks a process to hold its tasks (checkpointer.holdSlack).
	prepareMsg struct{}
	// reportMsg answers prepareMsg, for a subtree of processes (checkpoint_tree.go): their
	// tasks are held at iteration bound at most, the smallest n of their Iterate calls is
	// minIter, and busy of them, the lowest rank firstBusy, still hold buffers of an earlier
	// checkpoint's pieces.
	reportMsg struct {
		bound, minIter  int64
		busy, firstBusy int
	}
	// armMsg asks a process to arm checkpoint k; armedMsg answers it.
	armMsg   struct{ k int }
	armedMsg struct{ k int }
	// goMsg lifts the hold; k is the checkpoint armed, 0 when none was.
	goMsg struct{ k int }
	// copiedMsg says that the tasks of the sender have copied their kept states for k.
	copiedMsg struct{ k int }
	// writeMsg says that every process's tasks have copied theirs: write the pieces of k.
	writeMsg struct{ k int }
	// ckptPieceMsg sends a piece of checkpoint k to the partner, which keeps a copy: the
	// piece of task's location number loc, or, when state >= 0, of its kept state whose name
	// is the payload's first state bytes (the data follows).
	ckptPieceMsg struct {
		k, task int
		loc     uint32
		state   int
	}
	// storedMsg says that the partner stored a piece of k, or failed to.
	storedMsg struct {
		k      int
		failed bool
	}
	// doneMsg says that the sender's part of k is written on two processes, or failed;
	// wrote is the Summary of the pieces it wrote (their count and digest), when not failed.
	doneMsg struct {
		k      int
		failed bool
		wrote  checkpoint.Summary
	}
	// commitMsg commits k, whole the Summary of every piece of the job (each process's
	// manifest lists the pieces its directory holds, with it); committedMsg answers it,
	// failed when the manifest could not be written; discardMsg gives k up.
	commitMsg struct {
		k     int
		whole checkpoint.Summary
	}
	committedMsg struct {
		k      int
		failed bool
	}
	discardMsg struct{ k int }
	// warnMsg says that a piece or a commit of k failed, full for a full disk; the payload
	// says why.
	warnMsg struct {
		k    int
		full bool
	}
	// iteratedMsg says that a task of the sender ran Task.Iterate.
	iteratedMsg struct{}
	// inventoryMsg carries what the sender's directories hold (the payload, JSON).
	inventoryMsg struct{}
	// restartPlanMsg carries the part of rank 0's restart plan that concerns the receiver,
	// or why the job cannot start (the payload, planMsg in JSON).
	restartPlanMsg struct{}
	// partMsg carries a part of piece number piece of the restart plan of checkpoint k (its
	// number in rank 0's whole plan, planMsg.Index), at offset off in the piece.
	partMsg struct {
		k     int
		piece uint32
		off   int64
	}
	// unknownMsg is a msgCheckpoint of no phase above.
	unknownMsg struct{ phase uint8 }
)

// ckptHeader is the header of a checkpoint message of phase with checkpoint number k.
func ckptHeader(phase uint8, k int) transport.Header {
	return transport.Header{Type: msgCheckpoint, Flags: phase, Seq: uint64(k)}
}

func (prepareMsg) header() transport.Header { return ckptHeader(ckptPrepare, 0) }

func (m reportMsg) header() transport.Header {
	h := ckptHeader(ckptReport, 0)
	h.Arg, h.ID, h.Key, h.Seq = m.bound, uint64(m.minIter), uint32(m.busy), uint64(m.firstBusy)
	return h
}

func (m armMsg) header() transport.Header    { return ckptHeader(ckptArm, m.k) }
func (m armedMsg) header() transport.Header  { return ckptHeader(ckptArmed, m.k) }
func (m goMsg) header() transport.Header     { return ckptHeader(ckptGo, m.k) }
func (m copiedMsg) header() transport.Header { return ckptHeader(ckptCopied, m.k) }
func (m writeMsg) header() transport.Header  { return ckptHeader(ckptWrite, m.k) }

func (m commitMsg) header() transport.Header {
	h := ckptHeader(ckptCommit, m.k)
	h.Arg, h.ID = int64(m.whole.Pieces), m.whole.Digest
	return h
}
func (m discardMsg) header() transport.Header { return ckptHeader(ckptDiscard, m.k) }

func (m ckptPieceMsg) header() transport.Header {
	h := ckptHeader(ckptPiece, m.k)
	h.ID, h.Key, h.Arg = uint64(m.task), m.loc, int64(m.state)
	return h
}

func (m storedMsg) header() transport.Header {
	h := ckptHeader(ckptStored, m.k)
	h.Arg = int64(flags(m.failed, 1))
	return h
}

func (m doneMsg) header() transport.Header {
	h := ckptHeader(ckptDone, m.k)
	h.Arg, h.ID = int64(m.wrote.Pieces)<<1|int64(flags(m.failed, 1)), m.wrote.Digest
	return h
}

func (m warnMsg) header() transport.Header {
	h := ckptHeader(ckptWarn, m.k)
	h.Arg = int64(flags(m.full, 1))
	return h
}

func (m committedMsg) header() transport.Header {
	h := ckptHeader(ckptCommitted, m.k)
	h.Arg = int64(flags(m.failed, 1))
	return h
}

func (iteratedMsg) header() transport.Header    { return ckptHeader(ckptIterated, 0) }
func (inventoryMsg) header() transport.Header   { return ckptHeader(ckptInventory, 0) }
func (restartPlanMsg) header() transport.Header { return ckptHeader(ckptPlan, 0) }

func (m partMsg) header() transport.Header {
	h := ckptHeader(ckptPart, m.k)
	h.Key, h.Arg = m.piece, m.off
	return h
}

func (m unknownMsg) header() transport.Header { return ckptHeader(m.phase, 0) }

// decodeCkpt reads the checkpoint message of h in the form of its phase.
func decodeCkpt(h *transport.Header) ckptMessage {
	k := int(h.Seq)
	switch h.Flags {
	case ckptPrepare:
		return prepareMsg{}
	case ckptReport:
		return reportMsg{bound: h.Arg, minIter: int64(h.ID), busy: int(h.Key), firstBusy: int(h.Seq)}
	case ckptArm:
		return armMsg{k}
	case ckptArmed:
		return armedMsg{k}
	case ckptGo:
		return goMsg{k}
	case ckptCopied:
		return copiedMsg{k}
	case ckptWrite:
		return writeMsg{k}
	case ckptPiece:
		return ckptPieceMsg{k: k, task: int(h.ID), loc: h.Key, state: int(h.Arg)}
	case ckptStored:
		return storedMsg{k: k, failed: h.Arg == 1}
	case ckptDone:
		return doneMsg{k: k, failed: h.Arg&1 == 1, wrote: checkpoint.Summary{Pieces: int(h.Arg >> 1), Digest: h.ID}}
	case ckptCommit:
		return commitMsg{k: k, whole: checkpoint.Summary{Pieces: int(h.Arg), Digest: h.ID}}
	case ckptDiscard:
		return discardMsg{k}
	case ckptWarn:
		return warnMsg{k: k, full: h.Arg == 1}
	case ckptIterated:
		return iteratedMsg{}
	case ckptCommitted:
		return committedMsg{k: k, failed: h.Arg == 1}
	case ckptInventory:
		return inventoryMsg{}
	case ckptPlan:
		return restartPlanMsg{}
	case ckptPart:
		return partMsg{k: k, piece: h.Key, off: h.Arg}
	}
	return unknownMsg{h.Flags}
}

// pieceMsg is the message that sends p, a piece of checkpoint k, to the partner, and its
// payload; loc is the location's index when p is a location's.
func pieceMsg(k int, key checkpoint.Key, data []byte, loc int) (ckptPieceMsg, []byte) {
	m := ckptPieceMsg{k: k, task: key.Task, loc: uint32(loc), state: -1}
	if key.Kind == checkpoint.State {
		m.state = len(key.Name)
		return m, append([]byte(key.Name), data...)
	}
	return m, data
}

// pieceKey reads the key of a piece m carries and returns its data, in payload; location
// names the location of an index.
func pieceKey(m ckptPieceMsg, payload []byte, location func(uint32) Location) (checkpoint.Key, []byte, error) {
	if m.state < 0 {
		l := location(m.loc)
		return checkpoint.LocationKey(l.Task, l.Name), payload, nil
	}
	if m.state > len(payload) {
		return checkpoint.Key{}, nil, fmt.Errorf("checkpoint piece of %d bytes names a state of %d", len(payload), m.state)
	}
	return checkpoint.StateKey(m.task, string(payload[:m.state])), payload[m.state:], nil
}
