package orwl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/orwl-go/orwl/trace"
	"github.com/orwl-go/orwl/transport"
)

// traceEventLimit bounds the events kept per track, so a long traced run stays within
// memory and within the mesh's frame size when its part travels to rank 0.
const traceEventLimit = 100_000

// clockSamples is how many round trips measure a process's clock offset to rank 0; the
// one with the shortest round trip counts.
const clockSamples = 5

// measureClock sets the trace's clock offset to rank 0's wall clock.
func (j *job) measureClock(ctx context.Context) error {
	best, offset := time.Duration(math.MaxInt64), time.Duration(0)
	for range clockSamples {
		sent := time.Now()
		m := clockMsg{asked: sent.UnixNano()}
		if err := j.mesh.Send(0, transport.Requester, m.header(), nil); err != nil {
			return err
		}
		var theirs int64
		select {
		case theirs = <-j.node.wide.clock:
		case <-ctx.Done():
			return ctx.Err()
		}
		rtt := time.Since(sent)
		if rtt < best {
			mid := sent.Add(rtt / 2)
			best, offset = rtt, time.Duration(theirs-mid.UnixNano())
		}
	}
	j.rec.SetClockOffset(offset)
	return nil
}

// clockMessage answers a clock question at rank 0, or delivers the answer elsewhere. It
// never blocks the connection's reader: an answer nobody asked for (the channel holds the
// one that is awaited) is a broken peer's, and dropped.
func (n *node) clockMessage(from int, m clockMsg) {
	if n.j.rank == 0 {
		m.answer = time.Now().UnixNano()
		n.mesh.Send(from, transport.Owner, m.header(), nil)
		return
	}
	select {
	case n.wide.clock <- m.answer:
	default:
		n.log.Warn("orwl: a clock answer nobody asked for", "rank", from)
	}
}

// The trace's parts go to rank 0 along the job's tree (tree.go): each process, once its
// tasks have ended, waits for the parts of its children's subtrees and sends its parent one
// message with its own part and theirs, before its final barrier's marker on the same
// connection, so that rank 0 has every part when the barrier passes; a process whose job
// failed waits for none and sends what it has. The message's payload is, for each part,
// the rank and the length as uvarints, then the part.

// tracePart keeps the trace parts of the subtree of child from (see sendTracePart).
func (n *node) tracePart(from int, payload []byte) error {
	var ranks []int
	var parts [][]byte
	for len(payload) > 0 {
		r, k := binary.Uvarint(payload)
		size, l := uint64(0), 0
		if k > 0 {
			size, l = binary.Uvarint(payload[k:])
		}
		if k <= 0 || l <= 0 || size > uint64(len(payload)-k-l) {
			return fmt.Errorf("trace parts: a malformed part after %d", len(parts))
		}
		ranks = append(ranks, int(min(r, math.MaxInt32)))              // past the job: inSubtree says so
		parts = append(parts, bytes.Clone(payload[k+l:k+l+int(size)])) // payload is the mesh's scratch memory
		payload = payload[k+l+int(size):]
	}
	if err := n.inSubtree("trace parts", from, len(ranks), func(i int) int { return ranks[i] }); err != nil {
		return err
	}
	n.wide.mu.Lock()
	defer n.wide.mu.Unlock()
	if n.wide.partsFrom[from] {
		return errors.New("trace parts sent twice")
	}
	n.wide.partsFrom[from] = true
	for i, r := range ranks {
		n.wide.traceParts[r] = parts[i]
	}
	n.wide.partsIn <- struct{}{} // never blocks: room for every child's message
	return nil
}

// sendTracePart sends this process's part of the trace and its subtree's to its parent,
// once the subtree's have come or ctx (the job's) is done.
func (n *node) sendTracePart(ctx context.Context) {
	for range treeChildren(n.j.rank, n.j.procs) {
		select {
		case <-n.wide.partsIn:
		case <-ctx.Done():
		}
	}
	payload := appendPart(nil, n.j.rank, n.j.rec.Part())
	n.wide.mu.Lock()
	for r, p := range n.wide.traceParts {
		if p != nil {
			payload = appendPart(payload, r, p)
		}
	}
	n.wide.mu.Unlock()
	if err := n.sendWide(treeParent(n.j.rank), tracePartHeader(), payload); err != nil {
		n.log.Error("orwl: trace part not sent", "err", err)
	}
}

// appendPart appends rank's trace part p to a message of trace parts.
func appendPart(b []byte, rank int, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(rank))
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// writeTrace merges the parts of every process into the trace file and reports the summary
// (Config.TraceSummary).
func (j *job) writeTrace() error {
	var t *trace.Trace
	if j.node == nil {
		t = j.rec.Trace()
	} else {
		parts := [][]byte{j.rec.Part()}
		j.node.wide.mu.Lock()
		for r, p := range j.node.wide.traceParts {
			if r != 0 && p != nil {
				parts = append(parts, p)
			}
		}
		j.node.wide.mu.Unlock()
		var err error
		if t, err = trace.Merge(parts); err != nil {
			return fmt.Errorf("orwl: trace: %w", err)
		}
	}
	f, err := os.Create(j.traceFile)
	if err != nil {
		return fmt.Errorf("orwl: trace: %w", err)
	}
	if err := t.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("orwl: trace %s: %w", j.traceFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("orwl: trace %s: %w", j.traceFile, err)
	}
	if j.summary != nil {
		return trace.Summarize(j.summary, t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "orwl: trace written to %s\n", j.traceFile)
	if err := trace.Summarize(&b, t); err != nil {
		return err
	}
	_, err = io.WriteString(os.Stderr, b.String()) // one write: lines of other processes do not cut it
	return err
}
