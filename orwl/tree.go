package orwl

import (
	"fmt"
	"log/slog"
	"sync/atomic"
)

// The job's tree. The job-wide messages of this package that are not answers to one
// process travel along the binary tree over the ranks that the transport connects at the
// start (rank r's parent is (r-1)/2, its children 2r+1 and 2r+2), so that they ride
// connections that exist anyway, at a depth of log2(procs) hops and O(1) messages per
// process: a failure (spreadFailure, wide.go), the deadlock watch's reports
// (deadlock_dist.go), the trace's parts (trace.go), and a checkpoint's exchanges and a
// restart's inventories and plan (checkpoint_tree.go, restore.go).

// treeParent returns rank r's parent in the job's tree, -1 for the root.
func treeParent(r int) int {
	if r == 0 {
		return -1
	}
	return (r - 1) / 2
}

// treeChildren returns rank r's children in the job's tree of procs processes.
func treeChildren(r, procs int) []int {
	var c []int
	for _, k := range []int{2*r + 1, 2*r + 2} {
		if k < procs {
			c = append(c, k)
		}
	}
	return c
}

// treeNeighbours returns rank r's children and its parent, when it has one.
func treeNeighbours(r, procs int) []int {
	n := treeChildren(r, procs)
	if p := treeParent(r); p >= 0 {
		n = append(n, p)
	}
	return n
}

// reach returns the ranks that a message spread along the tree goes to from rank start:
// start's neighbours in the tree, but those of skip; in place of a neighbour that is lost,
// the ranks that neighbour would reach, recursively, so that the parts of the tree behind
// a lost process hear it all the same.
func reach(procs, start int, lost func(rank int) bool, skip ...int) []int {
	seen := map[int]bool{start: true}
	for _, r := range skip {
		seen[r] = true
	}
	var out []int
	var visit func(r int)
	visit = func(r int) {
		for _, nb := range treeNeighbours(r, procs) {
			if seen[nb] {
				continue
			}
			seen[nb] = true
			if lost(nb) {
				visit(nb)
			} else {
				out = append(out, nb)
			}
		}
	}
	visit(start)
	return out
}

// inSubtreeOf reports whether rank r is in root's subtree of the job's tree.
func inSubtreeOf(r, root int) bool {
	for r > root {
		r = treeParent(r)
	}
	return r == root
}

// inSubtree checks that from is a child of this process in the tree and that the ranks of
// the items of what it sent (rank(i) for each of them) are in its subtree.
func (n *node) inSubtree(what string, from, items int, rank func(i int) int) error {
	if treeParent(from) != n.j.rank {
		return fmt.Errorf("%s from a process that is not a child of rank %d", what, n.j.rank)
	}
	for i := range items {
		r := rank(i)
		if r < 0 || r >= n.j.procs {
			return fmt.Errorf("%s name rank %d, and the job has ranks 0 to %d", what, r, n.j.procs-1)
		}
		if !inSubtreeOf(r, from) {
			return fmt.Errorf("%s name rank %d, which is not in the sender's subtree", what, r)
		}
	}
	return nil
}

// wideCounts counts the job-wide messages that this process sent and received, by type
// (msgProblems...msgClock), for the debug log at the end of the job (logCounts).
type wideCounts struct {
	sent, received [msgClock - msgProblems + 1]atomic.Uint64
}

// wideKinds names the counted types in the log.
var wideKinds = [...]string{"problems", "fail", "stuck", "trace", "clock"}

// count counts a job-wide message of type typ, sent or received.
func (c *wideCounts) count(typ uint8, sent bool) {
	if typ < msgProblems || typ > msgClock {
		return
	}
	if sent {
		c.sent[typ-msgProblems].Add(1)
	} else {
		c.received[typ-msgProblems].Add(1)
	}
}

// logCounts logs, at debug level, how many job-wide messages of each kind this process
// sent and received.
func (n *node) logCounts() {
	var sent, received []any
	for i, kind := range wideKinds {
		sent = append(sent, kind, n.wide.counts.sent[i].Load())
		received = append(received, kind, n.wide.counts.received[i].Load())
	}
	n.log.Debug("orwl: job-wide messages", "rank", n.j.rank, slog.Group("sent", sent...),
		slog.Group("received", received...))
}
