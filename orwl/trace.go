package orwl

import (
	"bytes"
	"context"
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

// tracePart keeps the trace part of rank from, at rank 0 (see sendTracePart).
func (n *node) tracePart(from int, payload []byte) {
	n.wide.mu.Lock()
	n.wide.traceParts[from] = bytes.Clone(payload) // payload is the mesh's scratch memory
	n.wide.mu.Unlock()
}

// sendTracePart sends this process's trace to rank 0; it travels before the final
// barrier's marker on the same connection, so rank 0 has it when the barrier passes.
func (n *node) sendTracePart() {
	if err := n.mesh.Send(0, transport.Requester, tracePartHeader(), n.j.rec.Part()); err != nil {
		n.log.Error("orwl: trace part not sent", "err", err)
	}
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
