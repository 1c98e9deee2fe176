package orwl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/checkpoint"
)

// TestTreePlanIsRankZerosPlan: the inventories of every process, gathered up the job's tree
// (relay), give rank 0's coordinator the plan it makes from them all, and the parts each
// process keeps once the plan has come down the tree (split) are, bit for bit, those
// planParts makes of that plan for it: the same checkpoint and the same copies, here with
// the disks of some processes lost, so that others send their pieces.
func TestTreePlanIsRankZerosPlan(t *testing.T) {
	for _, n := range []int{2, 16, 37} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			j := scaleJob{n}
			own := make([]inventory, n)
			for r := range n {
				own[r] = j.inventory(t, r, 5)
				if r%3 == 1 { // its disk lost: its partner (r+1) holds its pieces
					own[r] = inventory{Rank: r}
				}
			}
			// The inventories up the tree, as each process's relay gathers them.
			relays := make([]relay, n)
			sums := make([][]inventory, n)
			for r := n - 1; r >= 1; r-- {
				children := treeChildren(r, n)
				_, all, err := relays[r].add(r, r, children, inventoryMsg{}, own[r:r+1])
				for _, child := range children {
					_, all, err = relays[r].add(r, child, children, inventoryMsg{}, sums[child])
				}
				if err != nil || checkSubtree(r, n, ranks(all)) != nil {
					t.Fatalf("rank %d gathered %v, %v", r, ranks(all), err)
				}
				sums[r] = all
			}
			s := newCkptCoordinator(n, n, j.owner(), "")
			acts := s.step(coordInput{kind: onAnswer, from: 0, msg: inventoryMsg{}, invs: own[:1]})
			for _, child := range treeChildren(0, n) {
				acts = append(acts, s.step(coordInput{kind: onAnswer, from: child, msg: inventoryMsg{}, invs: sums[child]})...)
			}
			var msg planMsg
			last := acts[len(acts)-1]
			if last.to != 0 || json.Unmarshal(last.payload, &msg) != nil {
				t.Fatalf("rank 0 does %+v, not send itself the plan", acts)
			}

			// The plan rank 0 makes of every inventory at once, and each process's part of it.
			invs := make([]*checkpoint.Inventory, n)
			for r := range own {
				invs[r] = &own[r].Inventory
			}
			dest := func(k checkpoint.Key) int { return j.owner()[k.Task] }
			plan, _ := checkpoint.Choose(invs, dest)
			sent := false // a piece read by a process other than its task's
			for i, p := range plan.Pieces {
				sent = sent || plan.From[i] != dest(p.Key)
			}
			if plan.Checkpoint != 5 || !sent {
				t.Fatalf("the plan restarts from checkpoint %d, with copies of %v; want 5, and copies of the partners of the disks lost", plan.Checkpoint, plan.From)
			}
			want := planParts(plan, dest, n)

			// The parts down the tree, through JSON as on the wire.
			var down func(r int, parts []planPart)
			down = func(r int, parts []planPart) {
				if err := checkSubtree(r, n, ranks(parts)); err != nil {
					t.Fatalf("rank %d is sent the parts of %v: %v", r, ranks(parts), err)
				}
				mine, below := split(r, n, parts)
				if !reflect.DeepEqual(mine, want[r]) {
					t.Errorf("rank %d keeps %+v, rank 0's plan gives it %+v", r, mine, want[r])
				}
				for i, child := range treeChildren(r, n) {
					var sent planMsg
					if err := json.Unmarshal(mustJSON(t, planMsg{Parts: below[i]}), &sent); err != nil {
						t.Fatal(err)
					}
					down(child, sent.Parts)
				}
			}
			down(0, msg.Parts)
		})
	}
}

// ranks returns the ranks of the inventories or parts of a subtree.
func ranks[T inventory | planPart](items []T) []int {
	out := make([]int, len(items))
	for i, it := range items {
		switch it := any(it).(type) {
		case inventory:
			out[i] = it.Rank
		case planPart:
			out[i] = it.Rank
		}
	}
	return out
}

// TestSubtreesAreChecked: inventories that a child sends up the tree must be those of its
// subtree, each once, and so must the parts of a plan that a parent sends down; a plan comes
// from the parent only. Anything else fails the job, naming the sender and what was wrong.
func TestSubtreesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		from    int
		m       ckptMessage
		payload string
		want    string
	}{
		{3, inventoryMsg{}, `[{"rank":3},{"rank":4}]`, "orwl: rank 1: inventories from rank 3 that name rank 4, which is not in the subtree of rank 3"},
		{3, inventoryMsg{}, `[{"rank":3},{"rank":3}]`, "orwl: rank 1: inventories from rank 3 that name rank 3 twice"},
		{4, inventoryMsg{}, `[]`, "orwl: rank 1: inventories from rank 4 that name 0 ranks, and the subtree of rank 4 has 1"},
		{3, inventoryMsg{}, `[{"rank":9}]`, "orwl: rank 1: inventories from rank 3 that name rank 9, and the job has ranks 0 to 6"},
		{0, restartPlanMsg{}, `{"parts":[{"rank":1},{"rank":3}]}`, "orwl: checkpoint message from rank 0: a restart plan whose parts name 2 ranks, and the subtree of rank 1 has 3"},
		{2, restartPlanMsg{}, `{"error":"no"}`, "orwl: rank 1: a restart plan from rank 2, and such messages come from rank 0 through rank 0, its parent in the job's tree"},
		{0, restartPlanMsg{}, `{"parts":`, "orwl: checkpoint message from rank 0: unexpected end of JSON input"},
	} {
		j := &job{rank: 1, procs: 7, cancel: func(error) {}}
		c := &checkpointer{j: j, restart: &restart{planned: make(chan struct{}), arrived: make(chan struct{})}}
		j.ckpt = c
		c.handle(tc.from, tc.m, []byte(tc.payload))
		if err := j.failure(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s from rank %d: job error %v, want %q", tc.payload, tc.from, err, tc.want)
		}
	}
}
