package orwl

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orwl-go/orwl/checkpoint"
	"github.com/orwl-go/orwl/internal/tick"
)

// Rank 0's coordinator of checkpoints: the exchanges that take one, and the warnings
// (checkpoint.go has the overview).

// ckptReply is a process's answer to rank 0.
type ckptReply struct {
	from   int
	phase  uint8
	bound  int64 // ckptReport
	minIt  int64 // ckptReport
	busy   bool  // ckptReport
	pieces []checkpoint.PieceInfo
	failed bool // ckptDone
}

// coordinate is rank 0's part: a checkpoint every c.every until ctx is done.
func (c *checkpointer) coordinate(ctx context.Context) {
	tick.Every(ctx, c.every, func() bool { return c.take(ctx) })
}

// take takes one checkpoint; it returns false when ctx ended first.
func (c *checkpointer) take(ctx context.Context) bool {
	reports, ok := c.exchange(ctx, prepareMsg{}, ckptReport)
	if !ok {
		return false
	}
	var busy []int
	for _, r := range reports {
		if r.busy {
			busy = append(busy, r.from)
		}
	}
	if len(busy) > 0 {
		slices.Sort(busy)
		c.j.log.Debug(fmt.Sprintf("orwl: checkpoint skipped: ranks %v still write pieces of an earlier checkpoint (a slow disk, or one that failed)", busy))
	}
	k, ok := nextCheckpoint(reports, c.start())
	if !ok || len(busy) > 0 {
		c.broadcast(goMsg{}, nil)
		return true
	}
	c.armedAt = time.Now()
	if _, ok := c.exchange(ctx, armMsg{int(k)}, ckptArmed); !ok {
		return false
	}
	c.broadcast(goMsg{int(k)}, nil)
	if _, ok := c.gather(ctx, ckptCopied); !ok {
		return false
	}
	c.broadcast(writeMsg{int(k)}, nil)
	done, ok := c.gather(ctx, ckptDone)
	if !ok {
		return false
	}
	var pieces []checkpoint.PieceInfo
	for _, r := range done {
		if r.failed {
			c.broadcast(discardMsg{int(k)}, nil)
			return true
		}
		pieces = append(pieces, r.pieces...)
	}
	payload, _ := json.Marshal(pieces)
	c.broadcast(commitMsg{int(k)}, payload)
	return true
}

// nextCheckpoint returns the number of the checkpoint the processes' reports allow: one past
// the iteration after the highest any task may enter, and never one at or below start, the
// checkpoint the job resumed from (a Store removes its checkpoints numbered as high or higher
// at the first write of a number). ok is false when the job ends first, or iterates without
// Iterate.
func nextCheckpoint(reports []ckptReply, start int) (k int64, ok bool) {
	bound, minIter := int64(-1), int64(math.MaxInt64)
	for _, r := range reports {
		bound, minIter = max(bound, r.bound), min(minIter, r.minIt)
	}
	k = max(bound+2, int64(start)+1)
	return k, k < minIter && minIter != math.MaxInt64
}

// exchange sends m to every process and gathers their answers of phase want.
func (c *checkpointer) exchange(ctx context.Context, m ckptMessage, want uint8) ([]ckptReply, bool) {
	c.broadcast(m, nil)
	return c.gather(ctx, want)
}

// broadcast sends m to every process, this one included.
func (c *checkpointer) broadcast(m ckptMessage, payload []byte) {
	for r := range c.j.procs {
		c.send(r, m, payload)
	}
}

// gather waits for the answer of phase want of every process.
func (c *checkpointer) gather(ctx context.Context, want uint8) ([]ckptReply, bool) {
	var got []ckptReply
	for len(got) < c.j.procs {
		select {
		case <-ctx.Done():
			return nil, false
		case r := <-c.replies:
			if r.phase != want {
				c.j.fail(fmt.Errorf("orwl: checkpoint: rank %d answered %d, expected %d", r.from, r.phase, want))
				return nil, false
			}
			got = append(got, r)
		}
	}
	return got, true
}

// report is rank 0's part of warn: it logs what rank from could not write of checkpoint k
// (m.full: a full disk), and why. A full disk is logged once for the whole job, however
// many processes find it, at however many checkpoints; any other trouble each time.
func (c *checkpointer) report(from int, m warnMsg, why string) {
	c.mu.Lock()
	first := !m.full || !c.full
	c.full = c.full || m.full
	c.mu.Unlock()
	if !first {
		return
	}
	msg := fmt.Sprintf("orwl: checkpoint %d not written (rank %d); the job goes on and the previous checkpoint stays: %s", m.k, from, why)
	if m.full {
		msg += " (a full disk is reported once per job)"
	}
	c.j.log.Warn(msg)
}
