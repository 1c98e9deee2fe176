package fluid

import (
	"context"
	"testing"
)

// TestRunIsBitIdenticalToSequential: whatever the number of tasks, the job ends with the
// particles of the sequential reference, bit for bit, and the same interactions. 8 tasks
// need 11000 particles or more (9³ cells, 91 per task at least).
func TestRunIsBitIdenticalToSequential(t *testing.T) {
	for _, c := range []struct {
		n, steps int
		tasks    []int
	}{{5000, 5, []int{1, 2, 3}}, {11000, 2, []int{5, 8}}} {
		want, interactions, _, err := Sequential(Params{N: c.n, Steps: c.steps, Seed: 1, Tasks: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tasks := range c.tasks {
			p := Params{N: c.n, Steps: c.steps, Seed: 1, Tasks: tasks}
			res, err := Run(context.Background(), p)
			if err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			if res.State.Checksum() != want.Checksum() || res.Interactions != interactions || res.Computed != interactions {
				t.Fatalf("%+v: checksum %016x, %d interactions (%d computed); sequential %016x, %d",
					p, res.State.Checksum(), res.Interactions, res.Computed, want.Checksum(), interactions)
			}
		}
	}
}
