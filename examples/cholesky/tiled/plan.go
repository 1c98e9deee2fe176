package tiled

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/orwl-go/orwl/examples/grid"
)

// kind is the kernel an operation calls.
type kind uint8

const (
	potrf kind = iota // factor diagonal tile (k, k)
	trsm              // solve tile (i, k) against L(k, k)
	syrk              // update diagonal tile (j, j) with L(j, k)
	gemm              // update tile (i, j) with L(i, k) and L(j, k)
)

// op is one operation of the factorisation: it writes tile (i, j) at step k, reading the
// final tiles of column k that reads lists.
type op struct {
	kind    kind
	i, j, k int
}

// tile is a tile's (row, column) in tiles, row >= column.
type tile struct{ i, j int }

// written is the tile op writes.
func (o op) written() tile { return tile{o.i, o.j} }

// reads are the tiles op reads besides the one it writes.
func (o op) reads() []tile {
	switch o.kind {
	case trsm:
		return []tile{{o.k, o.k}}
	case syrk:
		return []tile{{o.j, o.k}}
	case gemm:
		return []tile{{o.i, o.k}, {o.j, o.k}}
	}
	return nil
}

// layout is the tiling of an N x N matrix over a grid of tasks.
type layout struct {
	n, nb, tiles int
	grid         grid.Grid
}

func newLayout(n, nb int, g grid.Grid) layout {
	return layout{n: n, nb: nb, tiles: (n + nb - 1) / nb, grid: g}
}

// width is the number of rows (or columns) of tile row i.
func (l layout) width(i int) int { return min(l.nb, l.n-i*l.nb) }

// tileLen is the length of the location of tile t, in float64s: its entries, and on the
// diagonal as many again for the inverses of the diagonal halves of L's tile, which the
// panel's operations multiply with (factorDiagonal, solvePanel).
func (l layout) tileLen(t tile) int {
	n := l.width(t.i) * l.width(t.j)
	if t.i == t.j {
		return 2 * n
	}
	return n
}

// owner is the task that owns tile t: 2-D block-cyclic, as ScaLAPACK deals blocks.
func (l layout) owner(t tile) int { return l.grid.ID(t.i%l.grid.P, t.j%l.grid.Q) }

// flops is the floating-point operations of o, counted as LAPACK's operation counts do
// (the leading terms).
func (l layout) flops(o op) float64 {
	wi, wj, wk := float64(l.width(o.i)), float64(l.width(o.j)), float64(l.width(o.k))
	switch o.kind {
	case potrf:
		return wk * wk * wk / 3
	case trsm:
		return wi * wk * wk
	case syrk:
		return wj * wj * wk
	}
	return 2 * wi * wj * wk
}

// relativeRate is how fast each kind runs compared with gemm on a tile, the cost model of
// the schedule: OpenBLAS on one core with 512 x 512 tiles on the 2-core VM, gemm 75,
// syrk 71, the panel's dtrmm with the inverted diagonal tile 70, and the diagonal tile's
// factorisation with its whole inverse 16 GFLOP/s counted on potrf's flops. POTRF now
// leaves out a block of the inverse and runs at 45% of gemm's rate (22 against 49 GFLOP/s
// with both cores busy, 32 against 50 on 1024 x 1024 tiles); replaying the schedules of
// both models with the measured costs of every operation gave the same time within 0.5%
// at N=4096 and 8192, so the model stays. The diagonal tile stays the slowest step of the
// critical path, and the schedule starts it as soon as it can.
var relativeRate = [...]float64{potrf: 0.2, trsm: 0.9, syrk: 0.95, gemm: 1}

// operations lists the operations of one factorisation in the order of the right-looking
// algorithm (a topological order of their dependences).
func (l layout) operations() []op {
	var ops []op
	for k := range l.tiles {
		ops = append(ops, op{potrf, k, k, k})
		for i := k + 1; i < l.tiles; i++ {
			ops = append(ops, op{trsm, i, k, k})
		}
		for j := k + 1; j < l.tiles; j++ {
			ops = append(ops, op{syrk, j, j, k})
			for i := j + 1; i < l.tiles; i++ {
				ops = append(ops, op{gemm, i, j, k})
			}
		}
	}
	return ops
}

// schedule returns the operations of one factorisation in the order of their start in a
// simulated run (list scheduling): every task runs its own operations one at a time and,
// when free, starts the ready one with the longest path to the end of the factorisation
// (the critical path first: the panel and the updates the next panels need come before
// trailing updates that can wait). Start times respect every dependence, so the order is a
// topological one: as FIFO positions it is deadlock-free, and each task's operations in it
// are the order the task runs them. alone[p] says whether order[p] ran alone in the
// simulated run, every other task idle from its start to its end (the first panel's
// diagonal tile and solve, and the last updates, on the critical path). It depends only on
// the layout, so every task computes the same.
func (l layout) schedule() (order []op, alone []bool) {
	ops := l.operations()
	succ, preds := l.dependences(ops)
	cost := make([]float64, len(ops))
	level := make([]float64, len(ops)) // longest path to the end, own cost included
	for x := len(ops) - 1; x >= 0; x-- {
		cost[x] = l.flops(ops[x]) / relativeRate[ops[x].kind]
		level[x] = cost[x]
		for _, s := range succ[x] {
			level[x] = max(level[x], cost[x]+level[s])
		}
	}
	start, ranAlone := simulate(ops, succ, preds, cost, level, l)
	byStart := make([]int, len(ops))
	for x := range byStart {
		byStart[x] = x
	}
	slices.SortFunc(byStart, func(a, b int) int { return cmp.Or(cmp.Compare(start[a], start[b]), cmp.Compare(a, b)) })
	order, alone = make([]op, len(ops)), make([]bool, len(ops))
	for p, x := range byStart {
		order[p], alone[p] = ops[x], ranAlone[x]
	}
	return order, alone
}

// dependences returns, for every operation, those that must wait for it, and how many it
// waits for: the previous writer of the tile it writes, and the last writer of each tile
// it reads.
func (l layout) dependences(ops []op) (succ [][]int, preds []int) {
	last := map[tile]int{}
	succ, preds = make([][]int, len(ops)), make([]int, len(ops))
	for x, o := range ops {
		for _, t := range append(o.reads(), o.written()) {
			if w, ok := last[t]; ok {
				succ[w] = append(succ[w], x)
				preds[x]++
			}
		}
		last[o.written()] = x
	}
	return succ, preds
}

// simulate runs the list schedule and returns every operation's start time, and whether it
// ran while no other task did.
func simulate(ops []op, succ [][]int, preds []int, cost, level []float64, l layout) (start []float64, alone []bool) {
	tasks := l.grid.Tasks()
	ready := make([]readyQueue, tasks)
	for t := range ready {
		ready[t].level = level
	}
	waiting := slices.Clone(preds)
	for x := range ops {
		if waiting[x] == 0 {
			heap.Push(&ready[l.owner(ops[x].written())], x)
		}
	}
	start, alone = make([]float64, len(ops)), make([]bool, len(ops))
	running := make([]int, tasks) // each task's operation, -1 when idle
	for t := range running {
		running[t] = -1
	}
	var events eventQueue
	now := 0.0
	for done := 0; done < len(ops); {
		for t := range tasks {
			if running[t] < 0 && ready[t].Len() > 0 {
				x := heap.Pop(&ready[t]).(int)
				start[x], alone[x] = now, true
				for _, y := range running { // running beside x: neither is alone
					if y >= 0 {
						alone[x], alone[y] = false, false
					}
				}
				running[t] = x
				heap.Push(&events, event{now + cost[x], x})
			}
		}
		e := heap.Pop(&events).(event)
		now, done = e.at, done+1
		running[l.owner(ops[e.op].written())] = -1
		for _, s := range succ[e.op] {
			if waiting[s]--; waiting[s] == 0 {
				heap.Push(&ready[l.owner(ops[s].written())], s)
			}
		}
	}
	return start, alone
}

// readyQueue holds the ready operations of a task, the longest path first (then the first
// in the algorithm's order).
type readyQueue struct {
	ops   []int
	level []float64
}

func (q readyQueue) Len() int { return len(q.ops) }
func (q readyQueue) Less(a, b int) bool {
	x, y := q.ops[a], q.ops[b]
	return q.level[x] > q.level[y] || q.level[x] == q.level[y] && x < y
}
func (q readyQueue) Swap(a, b int) { q.ops[a], q.ops[b] = q.ops[b], q.ops[a] }
func (q *readyQueue) Push(x any)   { q.ops = append(q.ops, x.(int)) }
func (q *readyQueue) Pop() any {
	x := q.ops[len(q.ops)-1]
	q.ops = q.ops[:len(q.ops)-1]
	return x
}

// event is the end of an operation in the simulation.
type event struct {
	at float64
	op int
}

// eventQueue orders events by time, then by operation.
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(a, b int) bool {
	return q[a].at < q[b].at || q[a].at == q[b].at && q[a].op < q[b].op
}
func (q eventQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	x := (*q)[len(*q)-1]
	*q = (*q)[:len(*q)-1]
	return x
}
