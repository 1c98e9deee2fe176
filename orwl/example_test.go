package orwl_test

import (
	"context"
	"fmt"

	"github.com/orwl-go/orwl/orwl"
)

// Task 0 produces a value in every iteration; the other tasks read each value exactly once.
// The order in every FIFO is fixed by Schedule, so the output is the same on every run.
func Example() {
	const tasks, iterations = 3, 4
	seen := make([][]float64, tasks)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"value"}},
		func(ctx context.Context, t *orwl.Task) error {
			value := t.Loc(0, "value")
			if t.ID() == 0 {
				t.Scale("value", 8)
				produce := t.WriteInsert(value, 0) // position 0: first in every iteration
				if err := t.Schedule(ctx); err != nil {
					return err
				}
				for i := range iterations {
					if err := produce.Section(ctx, func(b []byte) error {
						orwl.Float64s(b)[0] = float64(i * i)
						return nil
					}); err != nil {
						return err
					}
				}
				return nil
			}
			consume := t.ReadInsert(value, 1) // position 1: after the producer, readers together
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for range iterations {
				if err := consume.Section(ctx, func(b []byte) error {
					seen[t.ID()] = append(seen[t.ID()], orwl.Float64s(b)[0])
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	fmt.Println(seen[1], seen[2], err)
	// Output: [0 1 4 9] [0 1 4 9] <nil>
}
