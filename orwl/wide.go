package orwl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// This file holds the node's job-wide service (node.wide), apart from node.go so that a
// grant's path does not cross it: the init-phase mistakes that the processes exchange at
// the schedule, and a failure spread along the job's tree (tree.go), with what a failure
// or a lost process does to this process's requests on the locations of others.

// jobWide is the state of what the processes do together; guarded by mu (lock order:
// lockorder.go).
type jobWide struct {
	mu           sync.Mutex
	problems     []rankProblems      // init-phase mistakes of this process's subtree, at the schedule
	problemsFrom map[int]bool        // the children whose subtree's mistakes came
	problemsIn   chan struct{}       // a message for each child's (not guarded)
	allProblems  chan []rankProblems // everybody's, from the parent (not guarded)
	failed       chan struct{}       // closed when this process spreads a failure (not guarded)
	watch        deadlockWatch       // rank 0: the reports of stuck processes
	traceParts   [][]byte            // by rank: the trace parts of this process's subtree, at the end
	partsFrom    map[int]bool        // the children whose subtree's parts came
	partsIn      chan struct{}       // a message for each child's (not guarded)
	lost         []bool              // by rank: lost processes (PeerLost)
	spread       *spreading          // the failure this process spread, nil until it does
	clock        chan int64          // rank 0's answers to clock questions (not guarded)
	counts       wideCounts          // the job-wide messages sent and received (not guarded)
}

// newJobWide returns the job-wide state of a process of a job of procs processes.
func newJobWide(procs int) jobWide {
	return jobWide{problemsFrom: map[int]bool{}, problemsIn: make(chan struct{}, 2),
		allProblems: make(chan []rankProblems, 1), failed: make(chan struct{}), traceParts: make([][]byte, procs),
		partsFrom: map[int]bool{}, partsIn: make(chan struct{}, 2), lost: make([]bool, procs),
		clock: make(chan int64, 1)}
}

// exchangeProblems tells every process this one's init-phase mistakes and returns everybody's,
// in rank order, along the job's tree: each process waits for its children's subtrees' and
// sends its parent its own and theirs; rank 0, which then has everybody's, sends them down,
// and each process passes them on to its children. A barrier follows, which every process
// reaches having sent everything before it (see job.schedule).
func (n *node) exchangeProblems(ctx context.Context, mine []error) ([]string, error) {
	children := treeChildren(n.j.rank, n.j.procs)
	for range children {
		if _, err := await(ctx, n, n.wide.problemsIn); err != nil {
			return nil, err
		}
	}
	n.wide.mu.Lock()
	if err := errors.Join(mine...); err != nil {
		n.wide.problems = append(n.wide.problems, rankProblems{Rank: n.j.rank, Text: err.Error()}) // one line per mistake
	}
	all := slices.Clone(n.wide.problems)
	n.wide.mu.Unlock()
	slices.SortFunc(all, func(a, b rankProblems) int { return a.Rank - b.Rank })
	if parent := treeParent(n.j.rank); parent >= 0 {
		if err := n.sendProblems(parent, problemsMsg{}, all); err != nil {
			return nil, err
		}
		var err error
		if all, err = await(ctx, n, n.wide.allProblems); err != nil {
			return nil, err
		}
	}
	for _, c := range children {
		if err := n.sendProblems(c, problemsMsg{all: true}, all); err != nil {
			return nil, err
		}
	}
	if err := n.mesh.Barrier(ctx); err != nil {
		return nil, err
	}
	var texts []string
	for _, p := range all {
		texts = append(texts, p.Text)
	}
	return texts, nil
}

// rankProblems is the text of the init-phase mistakes of one process, as they travel in the
// tree.
type rankProblems struct {
	Rank int
	Text string
}

// sendProblems sends m with ps in JSON to neighbour to.
func (n *node) sendProblems(to int, m problemsMsg, ps []rankProblems) error {
	payload, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	return n.sendWide(to, m.header(), payload)
}

// problemsFrom takes the init-phase mistakes that neighbour from sent (see
// exchangeProblems): its subtree's, from a child; everybody's, from the parent.
func (n *node) problemsFrom(from int, m problemsMsg, payload []byte) error {
	var ps []rankProblems
	if err := json.Unmarshal(payload, &ps); err != nil {
		return fmt.Errorf("insert mistakes: %w", err)
	}
	n.wide.mu.Lock()
	defer n.wide.mu.Unlock()
	if m.all {
		if from != treeParent(n.j.rank) {
			return fmt.Errorf("the job's insert mistakes from a process that is not rank %d's parent", n.j.rank)
		}
		select {
		case n.wide.allProblems <- ps:
			return nil
		default:
			return errors.New("the job's insert mistakes sent twice")
		}
	}
	if err := n.inSubtree("insert mistakes", from, len(ps), func(i int) int { return ps[i].Rank }); err != nil {
		return err
	}
	if n.wide.problemsFrom[from] {
		return errors.New("insert mistakes sent twice")
	}
	n.wide.problemsFrom[from] = true
	n.wide.problems = append(n.wide.problems, ps...)
	n.wide.problemsIn <- struct{}{} // never blocks: room for every child's message
	return nil
}

// await returns a value from ch, or why it stopped waiting for one: ctx is done, or n's
// job failed.
func await[T any](ctx context.Context, n *node, ch <-chan T) (T, error) {
	var v T
	select {
	case v = <-ch:
		return v, nil
	case <-ctx.Done():
		return v, ctx.Err()
	case <-n.wide.failed:
		return v, n.j.failure()
	}
}

// peerFailure is the failure of another process of the job, as it reported it: origin
// rank failed with msg, which this process heard from neighbour via; note says what this
// process adds (that it is the one lost, or was paused); yields, that msg only says that
// yet another process closed its mesh or failed (see job.fail).
type peerFailure struct {
	rank, via                  int
	msg, note                  string
	deadlock, peerLost, yields bool
}

func (e *peerFailure) Error() string {
	return fmt.Sprintf("orwl: rank %d failed: %s%s", e.rank, e.msg, e.note)
}

// Is makes a deadlock or a lost process that another process found match ErrDeadlock or
// ErrPeerLost here too.
func (e *peerFailure) Is(target error) bool {
	return e.deadlock && target == ErrDeadlock || e.peerLost && target == ErrPeerLost
}

// spreading is the failure that this process spreads: the message and its payload.
type spreading struct {
	failMsg
	text []byte
}

// spreadFailure tells the other processes that this job failed with err, along the job's
// tree: this process sends it to its neighbours in the tree (but the one it heard it from),
// each of which passes it on once to its own, so that every process hears it after
// log2(procs) hops, and each sends at most three messages (see tree.go). A process lost
// does not cut the tree: a neighbour lost already is skipped over (its own neighbours get
// the message in its place, reach), and one lost later, whose loss the transport reports
// to its neighbours, makes each of them send the failure on to the lost one's other
// neighbours (PeerLost). A failure that came from another process keeps its origin and
// text; passing it on adds nothing to them.
func (n *node) spreadFailure(err error) {
	f := &spreading{failMsg{origin: n.j.rank, deadlock: errors.Is(err, ErrDeadlock), peerLost: errors.Is(err, ErrPeerLost),
		yields: yields(err)}, []byte(err.Error())}
	from := -1
	if p, ok := errors.AsType[*peerFailure](err); ok {
		f = &spreading{failMsg{origin: p.rank, deadlock: p.deadlock, peerLost: p.peerLost, yields: p.yields}, []byte(p.msg)}
		from = p.via
	}
	n.wide.mu.Lock()
	defer n.wide.mu.Unlock()
	if n.wide.spread == nil {
		close(n.wide.failed)
	}
	n.wide.spread = f
	for _, r := range reach(n.j.procs, n.j.rank, n.wide.isLost, from) {
		n.sendWide(r, f.header(), f.text)
	}
}

// peerFailed fails the job with the failure that neighbour from passed on (see
// spreadFailure), saying so when this process is the one the others lost.
func (n *node) peerFailed(from int, m failMsg, payload []byte) error {
	if m.origin < 0 || m.origin >= n.j.procs {
		return fmt.Errorf("a failure of rank %d, and the job has ranks 0 to %d", m.origin, n.j.procs-1)
	}
	f := &peerFailure{rank: m.origin, via: from, msg: string(payload), deadlock: m.deadlock, peerLost: m.peerLost,
		yields: m.yields}
	if note := n.mesh.PauseNote(); note != "" {
		f.note = " " + note
	} else if strings.Contains(f.msg, fmt.Sprintf("process rank %d lost", n.j.rank)) {
		f.note = fmt.Sprintf(" (this process, rank %d, is the one the others lost: it was cut off from them, or too slow to answer within the peer timeout)", n.j.rank)
	}
	n.j.fail(f)
	return nil
}

// PeerLost implements transport.Handler: a process of the job is gone before it finished,
// so the job fails: every request fails, and the others that can be reached are told. When
// the lost process is a neighbour in the job's tree and this process has spread a failure
// already, it sends it on to the lost one's other neighbours too (see spreadFailure).
func (n *node) PeerLost(rank int, err error) {
	lostErr := fmt.Errorf("orwl: %w", err) // a *transport.PeerLostError, which names rank
	n.req.lose(rank, lostErr)
	n.wide.mu.Lock()
	n.wide.lost[rank] = true
	if f := n.wide.spread; f != nil && slices.Contains(treeNeighbours(n.j.rank, n.j.procs), rank) {
		for _, r := range reach(n.j.procs, rank, n.wide.isLost, n.j.rank) {
			n.sendWide(r, f.header(), f.text)
		}
	}
	n.wide.mu.Unlock()
	n.j.fail(lostErr)
}

// isLost reports whether rank is lost; jobWide.mu held.
func (w *jobWide) isLost(rank int) bool { return w.lost[rank] }

// failTickets fails every ticket of this process that still waits for its grant.
func (r *requester) failTickets(err error) {
	tab := r.table()
	for i := range tab {
		if t := tab[i].Load(); t != nil {
			t.latch.Fail(err)
		}
	}
}

// lose fails every later request on the locations of rank, which is lost with err.
func (r *requester) lose(rank int, err error) {
	r.lost[rank].Store(&err)
}
