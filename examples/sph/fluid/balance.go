package fluid

// This file decides which cells each task owns: the first split from an estimate of the
// work, then every step the move of each boundary between two neighbouring tasks, which
// both of them compute from the same integers.

// estimate returns an estimate of the work of every cell from the initial positions: its
// particles times the particles of its 27-cell neighbourhood (the candidates they test).
func estimate(k *consts, s *State) []int64 {
	count := make([]int64, k.cells)
	for i := range s.X {
		count[k.cellOf(s.X[i], s.Y[i], s.Z[i])]++
	}
	cost := make([]int64, k.cells)
	nc := k.nc
	for c := range cost {
		cx, cy, cz := c%nc, c/nc%nc, c/(nc*nc)
		var around int64
		for z := max(cz-1, 0); z <= min(cz+1, nc-1); z++ {
			for y := max(cy-1, 0); y <= min(cy+1, nc-1); y++ {
				for x := max(cx-1, 0); x <= min(cx+1, nc-1); x++ {
					around += count[x+nc*(y+nc*z)]
				}
			}
		}
		cost[c] = count[c] * around
	}
	return cost
}

// split cuts the cells into ranges, one per task, task t owning [b[t], b[t+1]) with
// b[0] = 0 and b[tasks] = len(cost): at the cuts nearest to equal sums of cost, each range
// at least band cells wide when there are several.
func split(cost []int64, tasks, band int) []int {
	b := make([]int, tasks+1)
	b[tasks] = len(cost)
	var total int64
	for _, w := range cost {
		total += w
	}
	var before int64 // the cost of the cells before c
	c := 0
	for t := 1; t < tasks; t++ {
		target := total/int64(tasks)*int64(t) + total%int64(tasks)*int64(t)/int64(tasks)
		for c < len(cost) && before+cost[c] <= target {
			before += cost[c]
			c++
		}
		if c < len(cost) && target-before > before+cost[c]-target { // the cell after is nearer
			before += cost[c]
			c++
		}
		b[t] = c
	}
	for t := 1; t < tasks; t++ {
		b[t] = min(max(b[t], b[t-1]+band), len(cost)-(tasks-t)*band)
	}
	return b
}

// side is what a task of a pair knows of its side of their boundary after a step.
type side struct {
	work  int64   // its work in the step (the neighbour counts of its particles)
	deg   int     // its neighbours, 1 or 2
	cells []int64 // the work of its cells along the boundary, the nearest first
}

// movable returns how many cells of a range of width cells may pass to a neighbour at one
// of its ends in one step: (width-band)/2, so that the range keeps at least band cells when
// both ends move in, and no particle moves past a neighbouring task.
func movable(width, band int) int { return max(0, (width-band)/2) }

// shift returns how far the boundary between the tasks left and right moves for the next
// step, in cells: negative when cells pass from left to right. It moves a share of the
// difference of their work (diffusion: the difference over one plus the larger number of
// neighbours, so a pair alone splits it evenly), the cells that pass chosen nearest to
// that share. Both tasks compute it from the same integers, so they agree bit for bit.
func shift(left, right side) int {
	move := (left.work - right.work) / int64(1+max(left.deg, right.deg))
	from, sign := left.cells, -1
	if move < 0 {
		from, move, sign = right.cells, -move, 1
	}
	var moved int64
	best, miss := 0, move
	for s, w := range from {
		moved += w
		if d := max(moved-move, move-moved); d < miss {
			best, miss = s+1, d
		}
	}
	return sign * best
}
