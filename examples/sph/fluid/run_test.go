package fluid

import (
	"context"
	"testing"
)

// TestRunIsBitIdenticalToSequential: whatever the number of tasks, the job ends with the
// particles of the sequential reference, bit for bit, and the same interactions.
func TestRunIsBitIdenticalToSequential(t *testing.T) {
	for _, c := range []struct{ n, steps int }{{5000, 6}, {12000, 3}} {
		want, interactions, _, err := Sequential(Params{N: c.n, Steps: c.steps, Seed: 1, Tasks: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tasks := range []int{1, 2, 3, 5, 8} {
			p := Params{N: c.n, Steps: c.steps, Seed: 1, Tasks: tasks}
			if tasks > MaxTasks(c.n) {
				continue
			}
			res, err := Run(context.Background(), p)
			if err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			if res.State.Checksum() != want.Checksum() || res.Interactions != interactions {
				t.Fatalf("%+v: checksum %016x, %d interactions; sequential %016x, %d", p, res.State.Checksum(), res.Interactions, want.Checksum(), interactions)
			}
			t.Logf("%+v: imbalance %.4f", p, res.Imbalance)
		}
	}
}
