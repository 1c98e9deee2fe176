package orwl

import (
	"slices"
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
