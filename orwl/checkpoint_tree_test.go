package orwl

import (
	"strings"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
)

// TestRelayGathersItsSubtree: a process answers its parent once it has its own answer and
// each child's, made one: the highest bound, the smallest n, the busy processes counted
// with the lowest named, a checkpoint failed if any part failed, the Summaries added. An
// answer from a process that is not its child, or a second one from a child in one
// exchange, is an error naming both ranks.
func TestRelayGathersItsSubtree(t *testing.T) {
	var r relay
	children := treeChildren(1, 7) // 3 and 4
	steps := []struct {
		from int
		m    ckptMessage
		want ckptMessage
	}{
		{3, reportMsg{bound: 9, minIter: 50, busy: 2, firstBusy: 7}, nil},
		{1, reportMsg{bound: 4, minIter: 40}, nil},
		{4, reportMsg{bound: 6, minIter: 60, busy: 1, firstBusy: 4}, reportMsg{bound: 9, minIter: 40, busy: 3, firstBusy: 4}},
		{4, armedMsg{11}, nil},
		{1, armedMsg{11}, nil},
		{3, armedMsg{11}, armedMsg{11}},
		{1, doneMsg{k: 11, wrote: checkpoint.Summary{Pieces: 2, Digest: 5}}, nil},
		{3, doneMsg{k: 11, failed: true}, nil},
		{4, doneMsg{k: 11, wrote: checkpoint.Summary{Pieces: 3, Digest: 1 << 63}}, doneMsg{k: 11, failed: true, wrote: checkpoint.Summary{Pieces: 5, Digest: 1<<63 + 5}}},
	}
	for i, st := range steps {
		got, _, err := r.add(1, st.from, children, st.m, nil)
		if err != nil || got != st.want {
			t.Fatalf("step %d: %#v from rank %d gave %#v, %v; want %#v", i, st.m, st.from, got, err, st.want)
		}
	}
	if _, _, err := r.add(1, 3, children, copiedMsg{11}, nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		from int
		want string
	}{
		{3, "orwl: checkpoint: rank 3 sent copied 11 twice to rank 1, which gathers its subtree's answers"},
		{5, "orwl: rank 1: copied 11 from rank 5, which is not its child in the job's tree (its children: [3 4])"},
	} {
		if _, _, err := r.add(1, bad.from, children, copiedMsg{11}, nil); err == nil || err.Error() != bad.want {
			t.Errorf("copied 11 from rank %d: %v, want %q", bad.from, err, bad.want)
		}
	}
}

// TestCoordinatorCountsSubtrees: rank 0's coordinator takes one answer from itself and one
// from each of its children, which counts for the child's subtree; an answer that comes
// from further down the tree, which should have come through its parent, fails the job
// naming both.
func TestCoordinatorCountsSubtrees(t *testing.T) {
	for n, want := range map[int][3]int{1: {1, 0, 0}, 2: {2, 1, 0}, 7: {7, 3, 3}, 10: {10, 6, 3}, 256: {256, 128, 127}} {
		for r, w := range want {
			if r < n && subtreeSize(r, n) != w {
				t.Errorf("%d processes: the subtree of rank %d has %d, want %d", n, r, subtreeSize(r, n), w)
			}
		}
	}
	s := newCkptCoordinator(10, 10, make([]int, 10), "")
	surveyTree(t, s, 10)
	runCoord(t, s, []coordStep{
		{tickIn(), []string{sent(prepareMsg{})}},
		{answerIn(2, reportMsg{bound: 1, minIter: 50}), nil},
		{answerIn(0, reportMsg{bound: 1, minIter: 50}), nil},
		{answerIn(1, reportMsg{bound: 1, minIter: 50}), []string{sent(armMsg{3})}},
		{answerIn(0, armedMsg{3}), nil},
		{answerIn(1, armedMsg{3}), nil},
		{coordInput{kind: onEnd}, []string{"log DEBUG: rank 0 arms checkpoint 3, and waits for armed 3 from each process, and ranks [2] had not answered"}},
	})
	s = newCkptCoordinator(10, 10, make([]int, 10), "")
	surveyTree(t, s, 10)
	acts := s.step(tickIn())
	acts = append(acts, s.step(answerIn(4, reportMsg{}))...)
	if last := acts[len(acts)-1]; last.kind != doFail || !strings.Contains(last.err.Error(), "rank 4 sent a report to rank 0, and its answers go through rank 1, its parent in the job's tree") {
		t.Fatalf("a report of rank 4 to rank 0: %+v", last)
	}
}

// surveyTree gives s, the coordinator of a job of n processes, their empty inventories as
// they come along the job's tree: rank 0's own, then each child's with its subtree's.
func surveyTree(t *testing.T, s *ckptCoordinator, n int) {
	t.Helper()
	s.step(inventoryIn(0, inventory{}))
	for _, child := range treeChildren(0, n) {
		in := coordInput{kind: onAnswer, from: child, msg: inventoryMsg{}}
		for r := range n {
			if inSubtreeOf(r, child) {
				in.invs = append(in.invs, inventory{Rank: r})
			}
		}
		s.step(in)
	}
	if !s.surveyed() {
		t.Fatalf("%d processes: no plan after every inventory", n)
	}
}
