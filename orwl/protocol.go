package orwl

import (
	"fmt"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// The grant's part of the ORWL protocol: its three messages, how each fills the transport's
// header and payload, and the dispatch of what arrives (node.Sink, node.Handle); with
// protocol_wide.go and protocol_ckpt.go, the only code that reads a header. Requests and
// releases travel on the requester's connection in the order its tasks made them (rule 14),
// grants on the owner's (transport.Role).
const (
	msgRequest = transport.TypeUser + iota // requestMsg: requester to owner
	msgGrant                               // grantMsg: owner to requester
	msgRelease                             // releaseMsg: requester to owner
	msgPair                                // pairMsg: either way, for a pair (pair.go)
)

// The flags of the grant's messages: a bit means one thing per message type.
const (
	flagWrite   = 1 << iota // requestMsg: a write
	flagInitial             // requestMsg: declared in the init phase, placed by the schedule
	flagData                // grantMsg, releaseMsg: the payload is the location's data
	flagRefused             // grantMsg: the owner refused the request; the payload says why
	flagFailed              // releaseMsg: the access failed; the payload says why
	flagMore                // grantMsg: another grant of the same FIFO operation follows for this process
	flagView                // grantMsg: the payload names the data, to read in place (hugemem.Share)
	flagPair                // grantMsg: the round of a dissolved pair's reader; its data is in the pair's buffer

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

func (m requestMsg) header() transport.Header {
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

// grantMsg tells the requester that ticket is granted, with the data (the payload) when its
// mirror does not hold version, or the name of the data to read in place (view: a read of
// a process of the same host, mirror.go), or that the owner refused it (the payload says why). The
// grants of one FIFO operation for one process all but the last say more, and are delivered
// together; the last may say recycle (mirror.go).
type grantMsg struct {
	loc     uint32
	ticket  uint64
	version uint64       // the data's version
	flow    trace.FlowID // the trace flow of the release that caused the grant
	size    int          // the payload's length, when decoded (the transport sets it on sending)

	data, refused, more, recycle, view, pair bool // the flags
}

func (m grantMsg) header() transport.Header {
	return transport.Header{Type: msgGrant, Key: m.loc, ID: m.ticket, Seq: m.version, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.refused, flagRefused) | flags(m.more, flagMore) | flags(m.recycle, flagRecycle) | flags(m.view, flagView) |
			flags(m.pair, flagPair)}
}

func decodeGrant(h *transport.Header) grantMsg {
	return grantMsg{loc: h.Key, ticket: h.ID, version: h.Seq, flow: trace.FlowID(h.Arg),
		data: h.Flags&flagData != 0, refused: h.Flags&flagRefused != 0, more: h.Flags&flagMore != 0,
		recycle: h.Flags&flagRecycle != 0, view: h.Flags&flagView != 0, pair: h.Flags&flagPair != 0, size: int(h.Len)}
}

// releaseMsg ends the access of ticket: a write's carries the data (the payload), a failed
// one's why, and hands nothing on; dropped: the requester's mirror holds nothing any more.
// next, when not 0, is the ticket of the handle's request of its next round (rule 6), like
// ticket's but a round later, which the owner places first.
type releaseMsg struct {
	loc    uint32
	ticket uint64
	next   uint64
	flow   trace.FlowID // the trace flow of the release, for the grant it causes
	size   int          // the payload's length, when decoded (the transport sets it on sending)

	data, failed, dropped bool // the flags
}

func (m releaseMsg) header() transport.Header {
	return transport.Header{Type: msgRelease, Key: m.loc, ID: m.ticket, Seq: m.next, Arg: int64(m.flow),
		Flags: flags(m.data, flagData) | flags(m.failed, flagFailed) | flags(m.dropped, flagDropped)}
}

func decodeRelease(h *transport.Header) releaseMsg {
	return releaseMsg{loc: h.Key, ticket: h.ID, next: h.Seq, flow: trace.FlowID(h.Arg), data: h.Flags&flagData != 0,
		failed: h.Flags&flagFailed != 0, dropped: h.Flags&flagDropped != 0, size: int(h.Len)}
}

// pairMsg is a message of a pair (pair.go): the owner names the shared buffers to the reader
// (pairSetup: its first request's ticket, the payload the header's and the data's
// hugemem.Share) or wakes it (pairWake); the reader reports its acquires and releases
// (pairAcquire, pairRelease: count is the counter's value).
type pairMsg struct {
	loc    uint32
	kind   uint8
	ticket uint64
	count  uint64
}

// The kinds of pairMsg.
const (
	pairSetup = iota + 1
	pairWake
	pairAcquire
	pairRelease
)

func (m pairMsg) header() transport.Header {
	return transport.Header{Type: msgPair, Key: m.loc, ID: m.ticket, Seq: m.count, Flags: m.kind}
}

func decodePair(h *transport.Header) pairMsg {
	return pairMsg{loc: h.Key, kind: h.Flags, ticket: h.ID, count: h.Seq}
}

// Sink implements transport.Handler: where a message's data lands (mirror.go), or a
// checkpoint piece from a partner (sinkWide).
func (n *node) Sink(from int, h *transport.Header) ([]byte, error) {
	switch h.Type {
	case msgGrant:
		return n.req.grantSink(from, decodeGrant(h))
	case msgRelease:
		return n.own.writeBackSink(from, decodeRelease(h))
	}
	return n.sinkWide(h), nil
}

// Handle implements transport.Handler: it hands the decoded message to its service (the
// job-wide ones to handleWide). A grant's message counts as a move for the deadlock watch;
// a malformed message fails the job.
func (n *node) Handle(from int, h *transport.Header, payload []byte) {
	var err error
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
	case msgPair:
		n.j.det.moved()
		err = n.pair(from, decodePair(h), payload)
	default:
		err = n.handleWide(from, h, payload)
	}
	if err != nil {
		n.j.fail(fmt.Errorf("orwl: protocol error from rank %d: %w", from, err))
	}
}
