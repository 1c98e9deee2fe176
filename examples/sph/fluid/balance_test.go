package fluid

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		cost        []int64
		tasks, band int
		want        []int
	}{
		{[]int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, 3, []int{0, 5, 10}},
		{[]int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 3, []int{0, 10}},
		{[]int64{0, 0, 0, 0, 8, 0, 0, 0, 0, 0}, 2, 3, []int{0, 4, 10}},          // the nearer cut of a heavy cell
		{[]int64{9, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, 3, []int{0, 3, 10}},          // at least a band per task
		{[]int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 9}, 3, 3, []int{0, 4, 7, 10}},       // and room for those after
		{[]int64{4, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 2, []int{0, 2, 6, 12}}, // equal sums: 8, 4+, 4+
	} {
		if got := split(c.cost, c.tasks, c.band); !slices.Equal(got, c.want) {
			t.Errorf("split(%v, %d, %d) = %v, want %v", c.cost, c.tasks, c.band, got, c.want)
		}
	}
}

func TestShift(t *testing.T) {
	cells := []int64{30, 30, 30}
	for _, c := range []struct {
		left, right side
		want        int
	}{
		{side{work: 100, deg: 1, cells: cells}, side{work: 0, deg: 1, cells: cells}, -2}, // 50 to move: 60 is nearest
		{side{work: 0, deg: 1, cells: cells}, side{work: 100, deg: 1, cells: cells}, 2},
		{side{work: 100, deg: 2, cells: cells}, side{work: 0, deg: 1, cells: cells}, -1}, // a third: 33
		{side{work: 50, deg: 1, cells: cells}, side{work: 50, deg: 1, cells: cells}, 0},
		{side{work: 1000, deg: 1, cells: cells}, side{work: 0, deg: 1, cells: cells}, -3}, // at most the movable cells
		{side{work: 100, deg: 1}, side{work: 0, deg: 1}, 0},                               // none movable
	} {
		if got := shift(c.left, c.right); got != c.want {
			t.Errorf("shift(%+v, %+v) = %d, want %d", c.left, c.right, got, c.want)
		}
	}
}
