package orwl

import (
	"fmt"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/transport"
)

// The checkpoint part of the protocol (protocol.go has the grant's messages and the
// dispatch, protocol_wide.go the job-wide ones): the message forms of a checkpoint's and a
// restart's exchanges, how each fills a header, and decodeCkpt, which reads one. With
// protocol.go and protocol_wide.go, the only code that builds or reads a header.

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
	ckptInventory                  // inventoryMsg: at the start, to rank 0, up the tree
	ckptPlan                       // restartPlanMsg: rank 0 to every process, at the start, down the tree
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
	// inventoryMsg carries what the directories of the processes of the sender's subtree
	// hold (the payload, a JSON list of inventory).
	inventoryMsg struct{}
	// restartPlanMsg carries the parts of rank 0's restart plan that concern the processes
	// of the receiver's subtree, or why the job cannot start (the payload, planMsg in JSON).
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
