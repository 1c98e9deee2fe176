package orwl_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/orwl"
)

// planned is one insert of a random plan.
type planned struct {
	task, loc, pos, seq int
	mode                fifo.Mode
}

// randomPlan gives every task a few inserts on random locations (task*names + name).
func randomPlan(rng *rand.Rand, tasks, names int) []planned {
	var plan []planned
	for task := range tasks {
		for seq := range 1 + rng.IntN(4) {
			mode := fifo.Read
			if rng.IntN(3) == 0 {
				mode = fifo.Write
			}
			plan = append(plan, planned{task: task, loc: rng.IntN(tasks * names), pos: rng.IntN(3), seq: seq, mode: mode})
		}
	}
	return plan
}

// mix is what a write does to a location's value: a fold that depends on the order.
func mix(v uint64, task, iter int) uint64 { return v*1_000_003 + uint64(task*1000+iter+1) }

// simulate plays the plan sequentially in the order Schedule fixes: iteration by iteration,
// each location's requests by (position, task, declaration order). It returns what every
// read saw, keyed by task, seq and iteration.
func simulate(plan []planned, iters int) map[[3]int]uint64 {
	sorted := slices.Clone(plan)
	slices.SortStableFunc(sorted, func(a, b planned) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.task, b.task), cmp.Compare(a.seq, b.seq))
	})
	values := map[int]uint64{}
	seen := map[[3]int]uint64{}
	for iter := range iters {
		for _, p := range sorted {
			if p.mode == fifo.Write {
				values[p.loc] = mix(values[p.loc], p.task, iter)
			} else {
				seen[[3]int{p.task, p.seq, iter}] = values[p.loc]
			}
		}
	}
	return seen
}

// runPlan is one task's part of a random plan: its handles in order of position, one
// section at a time, writes folding into the location's value, reads recording it. With
// jitter, sections yield the processor a random number of times.
func runPlan(ctx context.Context, task *orwl.Task, plan []planned, names []string, iters int, jitter *rand.Rand) (map[[3]int]uint64, error) {
	for _, name := range names {
		task.Scale(name, 8)
	}
	type mine struct {
		p planned
		h *orwl.Handle
	}
	var hs []mine
	for _, p := range plan {
		if p.task != task.ID() {
			continue
		}
		l := task.Loc(p.loc/len(names), names[p.loc%len(names)])
		insert := task.ReadInsert
		if p.mode == fifo.Write {
			insert = task.WriteInsert
		}
		hs = append(hs, mine{p, insert(l, p.pos)})
	}
	// Take the handles in order of position (declaration order within one).
	slices.SortStableFunc(hs, func(a, b mine) int { return cmp.Compare(a.p.pos, b.p.pos) })
	if err := task.Schedule(ctx); err != nil {
		return nil, err
	}
	seen := map[[3]int]uint64{}
	for iter := range iters {
		for _, m := range hs {
			err := m.h.Section(ctx, func(b []byte) error {
				if jitter != nil {
					for range jitter.IntN(3) {
						runtime.Gosched()
					}
				}
				v := binary.LittleEndian.Uint64(b)
				if m.p.mode == fifo.Write {
					binary.LittleEndian.PutUint64(b, mix(v, task.ID(), iter))
				} else {
					seen[[3]int{task.ID(), m.p.seq, iter}] = v
				}
				return nil
			})
			if err != nil {
				return seen, err
			}
		}
	}
	return seen, nil
}

// TestStressMatchesScheduleOrder runs random plans with random jitter inside sections: what
// every read sees must equal the sequential play of the order Schedule fixes.
func TestStressMatchesScheduleOrder(t *testing.T) {
	const iters = 30
	names := []string{"a", "b"}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tasks := 2 + rng.IntN(7)
		plan := randomPlan(rng, tasks, len(names))
		want := simulate(plan, iters)
		got := make([]map[[3]int]uint64, tasks)
		err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: names},
			func(ctx context.Context, task *orwl.Task) error {
				jitter := rand.New(rand.NewPCG(seed, uint64(task.ID())))
				seen, err := runPlan(ctx, task, plan, names, iters, jitter)
				got[task.ID()] = seen
				return err
			})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, seen := range got {
			for k, v := range seen {
				if want[k] != v {
					t.Fatalf("seed %d: task %d read %d of iteration %d saw %d, the schedule's order gives %d (plan %v)",
						seed, k[0], k[1], k[2], v, want[k], fmt.Sprint(plan))
				}
			}
		}
	}
}
