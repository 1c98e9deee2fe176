package orwl

import (
	"fmt"
	"slices"
	"sync"
)

// The exchanges of a checkpoint travel along the job's tree (tree.go): rank 0's messages
// to every process (prepare, arm, go, write, commit, discard) go to its children, each of
// which passes them on to its own before it runs them; the answers (report, armed, copied,
// done, committed) come back up, each process answering its parent once it has its own answer and its
// children's, the answers of its subtree made one (relay). Rank 0's coordinator then takes
// one answer from itself and one from each of its children, each counting for the ranks of
// its subtree (subtreeSize): a process sends and receives O(1) messages per exchange,
// whatever the number of processes, and the exchange takes log2(N) hops each way. A
// restart's inventories go up the same way, gathered into one message per process (each
// process's list of those of its subtree), and its plan down (restore.go).

// relay gathers the answers of a process's subtree for its parent.
type relay struct {
	mu      sync.Mutex
	pending map[relayKey]*relayed
}

// relayKey names an exchange: the coordinator's state it answers, and its checkpoint
// (answerOf; 0 for a report).
type relayKey struct {
	state coordState
	k     int
}

// relayed is an exchange's answers gathered so far.
type relayed struct {
	from []int       // the ranks that answered: this process, its children
	sum  ckptMessage // their answers made one (unite)
	invs []inventory // at a restart: the inventories of their subtrees
}

// isBroadcast reports whether m goes from rank 0 to every process along the tree.
func isBroadcast(m ckptMessage) bool {
	switch m.(type) {
	case prepareMsg, armMsg, goMsg, writeMsg, commitMsg, discardMsg:
		return true
	}
	return false
}

// broadcast sends m from rank 0 to every process: to rank 0 itself, which passes it on to
// its children (pass).
func (c *checkpointer) broadcast(m ckptMessage) { c.send(c.j.rank, m, nil) }

// pass passes m, which came from from, on to this process's children in the tree; m must
// come from this process's parent (fromParent). It reports whether m is to be run here.
func (c *checkpointer) pass(from int, m ckptMessage) bool {
	if !c.fromParent(from, m) {
		return false
	}
	for _, child := range treeChildren(c.j.rank, c.j.procs) {
		c.send(child, m, nil)
	}
	return true
}

// fromParent reports whether m, one of rank 0's messages to every process, came from from,
// this process's parent in the tree (or, at rank 0, rank 0 itself); when it did not, it
// fails the job, naming both ranks.
func (c *checkpointer) fromParent(from int, m ckptMessage) bool {
	rank := c.j.rank
	if parent := treeParent(rank); from != parent && (rank != 0 || from != 0) {
		c.j.fail(fmt.Errorf("orwl: rank %d: %s from rank %d, and such messages come from rank 0 through rank %d, its parent in the job's tree",
			rank, describe(m), from, parent))
		return false
	}
	return true
}

// answer takes an answer to rank 0 from from: this process's own, or one of a child,
// which speaks for the child's subtree. Rank 0 hands each to its coordinator; another
// process sends its parent the answers of its subtree made one, once it has them all.
func (c *checkpointer) answer(from int, m ckptMessage) { c.answerWith(from, m, nil) }

// answerWith is answer, for an answer that comes with invs, the inventories of the ranks it
// speaks for (an inventoryMsg): a child's must be those of its subtree, each once.
func (c *checkpointer) answerWith(from int, m ckptMessage, invs []inventory) {
	rank := c.j.rank
	if _, ok := m.(inventoryMsg); ok && from != rank { // a child's: those of its subtree
		ranks := make([]int, len(invs))
		for i, inv := range invs {
			ranks[i] = inv.Rank
		}
		if err := checkSubtree(from, c.j.procs, ranks); err != nil {
			c.j.fail(fmt.Errorf("orwl: rank %d: inventories from rank %d that %w", rank, from, err))
			return
		}
	}
	if rank == 0 {
		c.toCoordinator(coordInput{kind: onAnswer, from: from, msg: m, invs: invs})
		return
	}
	children := treeChildren(rank, c.j.procs)
	sum, all, err := c.relay.add(rank, from, children, m, invs)
	if err != nil {
		c.j.fail(err)
		return
	}
	switch sum.(type) {
	case nil:
	case inventoryMsg:
		c.sendRestart(treeParent(rank), sum, all)
	default:
		c.send(treeParent(rank), sum, nil)
	}
}

// add counts m, from from, in its exchange at process rank whose children are children,
// with invs, the inventories that come with an inventoryMsg, and returns the answers of the
// subtree made one, and all their inventories, when they are all in (nil until then). An
// answer from a process other than rank and its children, or a second one from a process
// in one exchange, is an error that names both ranks.
func (r *relay) add(rank, from int, children []int, m ckptMessage, invs []inventory) (ckptMessage, []inventory, error) {
	state, k := answerOf(m, 0)
	key := relayKey{state, k}
	if from != rank && !slices.Contains(children, from) {
		return nil, nil, fmt.Errorf("orwl: rank %d: %s from rank %d, which is not its child in the job's tree (its children: %v)", rank, describe(m), from, children)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = make(map[relayKey]*relayed)
	}
	g := r.pending[key]
	switch {
	case g == nil:
		g = &relayed{sum: m}
		r.pending[key] = g
	case slices.Contains(g.from, from):
		return nil, nil, fmt.Errorf("orwl: checkpoint: rank %d sent %s twice to rank %d, which gathers its subtree's answers", from, describe(m), rank)
	default:
		g.sum = unite(g.sum, m)
	}
	g.from = append(g.from, from)
	g.invs = append(g.invs, invs...)
	if len(g.from) < 1+len(children) {
		return nil, nil, nil
	}
	delete(r.pending, key)
	return g.sum, g.invs, nil
}

// unite makes a and b, answers of one exchange from two disjoint sets of processes, the
// answer of their union: the highest bound, the smallest n, the busy processes counted
// with the lowest named; a checkpoint failed (or its commit) if either failed, their
// pieces summed.
func unite(a, b ckptMessage) ckptMessage {
	switch a := a.(type) {
	case reportMsg:
		b := b.(reportMsg)
		sum := reportMsg{bound: max(a.bound, b.bound), minIter: min(a.minIter, b.minIter), busy: a.busy + b.busy, firstBusy: a.firstBusy}
		if a.busy == 0 || b.busy > 0 && b.firstBusy < a.firstBusy {
			sum.firstBusy = b.firstBusy
		}
		return sum
	case doneMsg:
		b := b.(doneMsg)
		return doneMsg{k: a.k, failed: a.failed || b.failed, wrote: a.wrote.Add(b.wrote)}
	case committedMsg:
		return committedMsg{k: a.k, failed: a.failed || b.(committedMsg).failed}
	}
	return a // armed, copied: nothing but their number; inventories: in their payloads
}

// subtreeSize is the number of ranks in rank r's subtree of the job's tree of procs
// processes, r included.
func subtreeSize(r, procs int) int {
	n := 0
	for lo, hi := r, r; lo < procs; lo, hi = 2*lo+1, 2*hi+2 {
		n += min(hi, procs-1) - lo + 1
	}
	return n
}

// checkSubtree checks that ranks are those of root's subtree of the job's tree of procs
// processes, each once, in any order; the error says which is not.
func checkSubtree(root, procs int, ranks []int) error {
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= procs {
			return fmt.Errorf("name rank %d, and the job has ranks 0 to %d", r, procs-1)
		}
		if !inSubtreeOf(r, root) {
			return fmt.Errorf("name rank %d, which is not in the subtree of rank %d", r, root)
		}
		if seen[r] {
			return fmt.Errorf("name rank %d twice", r)
		}
		seen[r] = true
	}
	if n := subtreeSize(root, procs); len(ranks) != n {
		return fmt.Errorf("name %d ranks, and the subtree of rank %d has %d", len(ranks), root, n)
	}
	return nil
}
