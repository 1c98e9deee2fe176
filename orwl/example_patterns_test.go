package orwl_test

import (
	"context"
	"fmt"

	"github.com/orwl-go/orwl/orwl"
)

// The introductory example of the ORWL papers, a ring of tasks that each own a block and a
// bound. At position 0 a task writes its block while it reads its left neighbour's bound; at
// position 1 it reads its block and writes its bound. A Group takes the handles of one
// position together: one error to check per position, not one per handle.
func ExampleGroup() {
	const tasks, iterations = 3, 4
	bounds := make([]float64, tasks)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"block", "bound"}},
		func(ctx context.Context, t *orwl.Task) error {
			me, left := t.ID(), (t.ID()+tasks-1)%tasks
			t.Scale("block", 2*8)
			t.Scale("bound", 8)
			pos0 := orwl.Group{t.WriteInsert(t.Loc(me, "block"), 0), t.ReadInsert(t.Loc(left, "bound"), 0)}
			pos1 := orwl.Group{t.ReadInsert(t.Loc(me, "block"), 1), t.WriteInsert(t.Loc(me, "bound"), 1)}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			return t.Iterate(ctx, iterations, func(int) error {
				if err := pos0.Section(ctx, func(data [][]byte) error {
					block, leftBound := orwl.Float64s(data[0]), orwl.Float64s(data[1])[0]
					block[0] = leftBound + 1
					block[1] = block[0] + float64(me)
					return nil
				}); err != nil {
					return err
				}
				return pos1.Section(ctx, func(data [][]byte) error {
					block, bound := orwl.Float64s(data[0]), orwl.Float64s(data[1])
					bound[0] = block[1]
					bounds[me] = bound[0]
					return nil
				})
			})
		})
	fmt.Println(bounds, err)
	// Output: [7 8 9] <nil>
}

// Halo exchange: a line of cells split among tasks, each computing its part in private
// memory with a ghost cell at each end. In every iteration a task publishes its edge cells
// (its locations "west" and "east", position 0), then reads the edges of its neighbours that
// face it (position 1) into its ghost cells, and computes. Every edge location cycles
// through its writer and its reader, so each task sees its neighbours' cells of the same
// iteration, and the result is the same as a sequential sweep's, on every run.
func Example_haloExchange() {
	const tasks, cells, iterations = 3, 4, 20
	line := make([][]float64, tasks)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"west", "east"}},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			u, v := make([]float64, cells+2), make([]float64, cells+2) // u[0], u[cells+1]: ghosts
			if me == 0 {
				u[0], v[0] = 100, 100 // the line's west end is held at 100, its east end at 0
			}
			t.Scale("west", 8)
			t.Scale("east", 8)
			publish := orwl.Group{t.WriteInsert(t.Loc(me, "west"), 0), t.WriteInsert(t.Loc(me, "east"), 0)}
			var fetch orwl.Group
			var ghosts []int // the ghost cell that each handle of fetch fills
			if me > 0 {
				fetch = append(fetch, t.ReadInsert(t.Loc(me-1, "east"), 1))
				ghosts = append(ghosts, 0)
			}
			if me < tasks-1 {
				fetch = append(fetch, t.ReadInsert(t.Loc(me+1, "west"), 1))
				ghosts = append(ghosts, cells+1)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			err := t.Iterate(ctx, iterations, func(int) error {
				if err := publish.Section(ctx, func(edges [][]byte) error {
					orwl.Float64s(edges[0])[0], orwl.Float64s(edges[1])[0] = u[1], u[cells]
					return nil
				}); err != nil {
					return err
				}
				if err := fetch.Section(ctx, func(edges [][]byte) error {
					for i, g := range ghosts {
						u[g] = orwl.Float64s(edges[i])[0]
					}
					return nil
				}); err != nil {
					return err
				}
				for i := 1; i <= cells; i++ {
					v[i] = (u[i-1] + u[i] + u[i+1]) / 3
				}
				u, v = v, u
				return nil
			})
			line[me] = u[1 : cells+1]
			return err
		})
	for _, part := range line {
		fmt.Printf("%5.1f\n", part)
	}
	fmt.Println(err)
	// Output:
	// [ 78.7  58.9  41.8  27.9]
	// [ 17.5  10.3   5.6   2.9]
	// [  1.3   0.6   0.2   0.1]
	// <nil>
}

// Gathering a result into one task: every task writes its partial sum once (a one-shot
// write at position 0), and task 0 reads all of them together at position 1, after every
// write, with one Group.
func Example_gather() {
	const tasks, n = 4, 100
	var total float64
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"partial"}},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			t.Scale("partial", 8)
			write := t.WriteInsertOnce(t.Loc(me, "partial"), 0)
			var partials orwl.Group // task 0's reads of every task's partial
			if me == 0 {
				for k := range tasks {
					partials = append(partials, t.ReadInsertOnce(t.Loc(k, "partial"), 1))
				}
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if err := write.Section(ctx, func(b []byte) error {
				sum := 0.0
				for i := me * n / tasks; i < (me+1)*n/tasks; i++ {
					sum += float64(i)
				}
				orwl.Float64s(b)[0] = sum
				return nil
			}); err != nil || me != 0 {
				return err
			}
			return partials.Section(ctx, func(data [][]byte) error {
				for _, b := range data {
					total += orwl.Float64s(b)[0]
				}
				return nil
			})
		})
	fmt.Println(total, err)
	// Output: 4950 <nil>
}

// A pipeline of three stages whose batches change size: stage 0 produces batch k of k+1
// values, stage 1 keeps the odd ones, squared, and stage 2 consumes them. A stage writes
// its own location "items", resized to the batch (Resize), and its successor reads it.
// Stage s takes its input and its output together at position s: every location is written
// at its stage's position and read at the next one, so every batch goes through in order
// while the stages work on different batches at once.
func ExampleHandle_Resize_pipeline() {
	const stages, batches = 3, 5
	var consumed [][]float64
	err := orwl.Run(context.Background(), orwl.Config{Tasks: stages, Locations: []string{"items"}},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			var in, out *orwl.Handle
			var stage orwl.Group
			if me > 0 {
				in = t.ReadInsert(t.Loc(me-1, "items"), me)
				stage = append(stage, in)
			}
			if me < stages-1 {
				out = t.WriteInsert(t.Loc(me, "items"), me)
				stage = append(stage, out)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			return t.Iterate(ctx, batches, func(k int) error {
				return stage.Section(ctx, func([][]byte) error {
					var batch []float64
					switch me {
					case 0:
						for i := range k + 1 {
							batch = append(batch, float64(i+1))
						}
					case 1:
						for _, x := range orwl.Float64s(in.Map()) {
							if int(x)%2 == 1 {
								batch = append(batch, x*x)
							}
						}
					default:
						consumed = append(consumed, append([]float64(nil), orwl.Float64s(in.Map())...))
						return nil
					}
					data, err := out.Resize(8 * len(batch))
					copy(orwl.Float64s(data), batch)
					return err
				})
			})
		})
	fmt.Println(consumed, err)
	// Output: [[1] [1] [1 9] [1 9] [1 9 25]] <nil>
}

// Initialise, then iterate: every task gives its location its first value once, with a
// one-shot write at position 0, before the iterations, whose handles come at position 1:
// each location's FIFO grants the initialising write first, so iteration 0 reads
// initialised data. Here a task doubles its value in every iteration, and task 1 also reads
// task 0's. The state is in the locations, so Iterate is all a job that takes checkpoints
// (Config.Checkpoint) needs to resume: a restarted job resumes at its checkpoint's iteration
// (Resumed) with the locations as they were then, so the initialisation belongs to a fresh
// start only (Schedule refuses it in a resumed job).
func ExampleTask_Iterate() {
	const iterations = 3
	seen := make([]float64, 0, iterations)
	var last [2]float64
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			me := t.ID()
			t.Scale("x", 8)
			var init *orwl.Handle
			if t.Resumed() == 0 {
				init = t.WriteInsertOnce(t.Loc(me, "x"), 0)
			}
			double := t.WriteInsert(t.Loc(me, "x"), 1)
			var peek *orwl.Handle
			if me == 1 {
				peek = t.ReadInsert(t.Loc(0, "x"), 2)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			if init != nil {
				if err := init.Section(ctx, func(b []byte) error {
					orwl.Float64s(b)[0] = float64(10 * (me + 1))
					return nil
				}); err != nil {
					return err
				}
			}
			return t.Iterate(ctx, iterations, func(int) error {
				if err := double.Section(ctx, func(b []byte) error {
					x := orwl.Float64s(b)
					x[0] *= 2
					last[me] = x[0]
					return nil
				}); err != nil || peek == nil {
					return err
				}
				return peek.Section(ctx, func(b []byte) error {
					seen = append(seen, orwl.Float64s(b)[0])
					return nil
				})
			})
		})
	fmt.Println(last, seen, err)
	// Output: [80 160] [20 40 80] <nil>
}
