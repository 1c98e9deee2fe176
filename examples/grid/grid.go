// Package grid is the P x Q grid of tasks the examples lay their data on: matmul's SUMMA
// and cholesky's tiles deal blocks 2-D block-cyclically over it, and the stencil splits a
// plane into one block per task of it. It spells a grid as the command lines take it
// (-grid PxQ) and chooses one when they do not.
package grid

import (
	"fmt"
	"strconv"
	"strings"
)

// Grid is a P x Q grid of tasks: P rows, Q columns; task (p, q) has id p*Q + q.
type Grid struct{ P, Q int }

// String returns "PxQ".
func (g Grid) String() string { return fmt.Sprintf("%dx%d", g.P, g.Q) }

// Tasks returns P*Q.
func (g Grid) Tasks() int { return g.P * g.Q }

// Coords returns the grid row and column of task id.
func (g Grid) Coords(id int) (p, q int) { return id / g.Q, id % g.Q }

// ID returns the task at grid row p, column q.
func (g Grid) ID(p, q int) int { return p*g.Q + q }

// Transpose returns the Q x P grid.
func (g Grid) Transpose() Grid { return Grid{P: g.Q, Q: g.P} }

// Square returns the most square grid of tasks tasks with P >= Q.
func Square(tasks int) Grid {
	q := 1
	for d := 1; d*d <= tasks; d++ {
		if tasks%d == 0 {
			q = d
		}
	}
	return Grid{P: tasks / q, Q: q}
}

// Fit returns the grid of tasks tasks whose blocks of a plane of nx x ny cells, split into
// P parts along x and Q along y, are the most square (the least halo for the cells).
func Fit(tasks, nx, ny int) Grid {
	best, g := -1.0, Grid{}
	for d := 1; d <= tasks; d++ {
		if tasks%d != 0 {
			continue
		}
		w, h := float64(nx)/float64(d), float64(ny)/float64(tasks/d)
		if score := min(w, h) / max(w, h); score > best {
			best, g = score, Grid{P: d, Q: tasks / d}
		}
	}
	return g
}

// Parse reads "PxQ", P and Q at least 1 and P*Q at most maxTasks.
func Parse(s string, maxTasks int) (Grid, error) {
	ps, qs, ok := strings.Cut(s, "x")
	p, err1 := strconv.Atoi(ps)
	q, err2 := strconv.Atoi(qs)
	if !ok || err1 != nil || err2 != nil || p < 1 || q < 1 {
		return Grid{}, fmt.Errorf("grid %q is not PxQ with P, Q >= 1 (for example 2x2)", s)
	}
	if p > maxTasks || q > maxTasks || p*q > maxTasks {
		return Grid{}, fmt.Errorf("grid %q has more than %d tasks", s, maxTasks)
	}
	return Grid{P: p, Q: q}, nil
}
