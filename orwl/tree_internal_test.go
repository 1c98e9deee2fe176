package orwl

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestReachSkipsLostProcesses: a message spread along the tree of 16 processes goes to the
// sender's neighbours but the one it came from, and, in place of a lost one, to that one's
// neighbours, recursively.
func TestReachSkipsLostProcesses(t *testing.T) {
	lost := func(ranks ...int) func(int) bool {
		return func(r int) bool { return slices.Contains(ranks, r) }
	}
	for _, tc := range []struct {
		name  string
		start int
		lost  func(int) bool
		skip  []int
		want  []int
	}{
		{"root", 0, lost(), nil, []int{1, 2}},
		{"interior, from its parent", 2, lost(), []int{0}, []int{5, 6}},
		{"interior, its own", 2, lost(), nil, []int{5, 6, 0}},
		{"leaf", 15, lost(), nil, []int{7}},
		{"a lost child", 0, lost(1), nil, []int{3, 4, 2}},
		{"a lost parent", 5, lost(2), nil, []int{11, 12, 6, 0}},
		{"a lost parent, from a sibling", 5, lost(2), []int{6}, []int{11, 12, 0}},
		{"lost child and grandchild", 0, lost(1, 3), nil, []int{7, 8, 4, 2}},
		{"around a lost one, from its parent", 1, lost(1), []int{0}, []int{3, 4}},
	} {
		if got := reach(16, tc.start, tc.lost, tc.skip...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: reach from %d = %v, want %v", tc.name, tc.start, got, tc.want)
		}
	}
}

// TestTracePartsFromAChild: rank 1 of 16 keeps the trace parts of its child 3's subtree
// (3, 7, 8, 15), and refuses parts of another subtree, from a process that is not its
// child, cut short, or sent twice, naming what was wrong.
func TestTracePartsFromAChild(t *testing.T) {
	newRank1 := func() *node { return newNode(&job{rank: 1, procs: 16}, slog.Default()) }
	n := newRank1()
	if err := n.tracePart(3, appendPart(appendPart(nil, 3, []byte("three")), 15, []byte("fifteen"))); err != nil {
		t.Fatal(err)
	}
	if string(n.wide.traceParts[3]) != "three" || string(n.wide.traceParts[15]) != "fifteen" || len(n.wide.partsIn) != 1 {
		t.Errorf("kept %q, %q and %d arrivals, want three, fifteen and 1", n.wide.traceParts[3], n.wide.traceParts[15], len(n.wide.partsIn))
	}
	if err := n.tracePart(3, appendPart(nil, 7, nil)); err == nil || !strings.Contains(err.Error(), "sent twice") {
		t.Errorf("a second message from child 3: %v", err)
	}
	for _, tc := range []struct {
		from    int
		payload []byte
		want    string
	}{
		{3, appendPart(nil, 5, nil), "name rank 5, which is not in the sender's subtree"},
		{3, appendPart(nil, 31, nil), "name rank 31, and the job has ranks 0 to 15"},
		{2, appendPart(nil, 2, nil), "from a process that is not a child of rank 1"},
		{4, appendPart(nil, 4, []byte("four"))[:3], "a malformed part after 0"},
	} {
		if err := newRank1().tracePart(tc.from, tc.payload); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parts from %d: %v, want an error saying %q", tc.from, err, tc.want)
		}
	}
}
