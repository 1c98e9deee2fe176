// Package wavefront is the engine of examples/levenshtein: the edit distance (Levenshtein:
// insert, delete and substitute cost 1) of two byte strings A and B, computed by a pipeline
// of ORWL tasks over the whole matrix of partial distances, the same whatever the number of
// tasks, processes and the block size.
//
// Task k owns a band of the columns of the matrix (a contiguous slice of B, the k-th of
// Tasks nearly equal ones) and walks down it in blocks of Block rows (slices of A), in
// order. A tile, one block of rows over one band, needs the row above it (the task's own
// previous block: kept in one array the width of the band), and the column left of it with
// the corner above that: the right edge of the same block in the band of task k-1. Task k
// reads that edge from a location of task k-1 and publishes its own right edge in a
// location of its own for task k+1. Task 0's left column is D[i][0] = i, the last task's
// edges are read by nobody, and its last value is the distance.
//
// Edges go through iterative handles: a task owns Slots edge locations, "edge0", "edge1",
// ..., and block r uses slot r % Slots. Task k writes its slot s at FIFO position 2s and
// task k+1 reads it at position 2s+1, so every edge location starts with its writer, and
// the iterative handles make it cycle writer, reader, writer, reader... one block of the
// slot after another. A task may therefore run Slots blocks ahead of its right neighbour
// before it waits for it to have read. In a block a task takes its read (of the left
// neighbour's edge, copied out and released at once) before its write (of its own edge),
// but no section is nested in another and the tasks form a line, not a ring: the write of
// block r waits only for the read of block r-Slots by task k+1, which needs only task k's
// own write of that block, so no cycle of waits can form.
//
// A task keeps its band of B, all of A, the row array of its band and two edges of Block+1
// values: memory O(len(A) + len(B)/Tasks) per task, never the matrix.
//
// The package computes and reports one job; it does not parse flags or print anything.
package wavefront

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// Slots is the number of edge locations each task publishes its blocks' right edges in,
// in turn: a task can be that many blocks ahead of its right neighbour.
const Slots = 2

// MaxTasks is the largest job Validate accepts.
const MaxTasks = 4096

// MaxLen is the longest string Validate accepts: distances are held in 32 bits.
const MaxLen = math.MaxUint32 - 1

// Params describe one job.
type Params struct {
	A, B  []byte // the strings; A runs down the rows of the matrix, B along its columns
	Tasks int    // tasks, each owning a band of B's columns (a band may be empty)
	Block int    // rows of A per block (the height of a tile)
	Trace string // orwl.Config.Trace: a file for the job's Chrome trace, or ""
}

// Validate reports what makes p unusable, or nil.
func (p Params) Validate() error {
	switch {
	case p.Tasks < 1 || p.Tasks > MaxTasks:
		return fmt.Errorf("%d tasks: want 1 to %d", p.Tasks, MaxTasks)
	case p.Block < 1:
		return fmt.Errorf("block of %d rows: want at least 1", p.Block)
	case len(p.A) > MaxLen || len(p.B) > MaxLen:
		return fmt.Errorf("strings of %d and %d bytes: at most %d each", len(p.A), len(p.B), MaxLen)
	}
	return nil
}

// Result is what Run returns in the process of task 0.
type Result struct {
	Distance int
	// Seconds is the time from the schedule to the end of the last task, which finishes
	// last: the whole computation.
	Seconds float64
}

// GCUPS is the speed of a job on strings of la and lb characters that took seconds, in
// giga cell updates per second: la·lb / seconds / 1e9 (0 when seconds is not positive).
func GCUPS(la, lb int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(la) * float64(lb) / seconds / 1e9
}

// Band returns the columns [lo, hi) of n that task k of tasks owns.
func Band(n, tasks, k int) (lo, hi int) {
	return int(int64(k) * int64(n) / int64(tasks)), int(int64(k+1) * int64(n) / int64(tasks))
}

// edgeName is the location of the edges of slot.
func edgeName(slot int) string { return fmt.Sprintf("edge%d", slot) }

// locations returns the names of the locations every task owns: the edge slots and
// "result", where the last task leaves the distance and its time for task 0.
func locations() []string {
	names := []string{"result"}
	for s := range Slots {
		names = append(names, edgeName(s))
	}
	return names
}

// Run computes the distance over the processes that the environment describes (one process
// when nothing started this one as part of a job). It returns the result in the process of
// task 0 and nil in the others.
func Run(ctx context.Context, p Params) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var result *Result
	err := orwl.Run(ctx, orwl.Config{Tasks: p.Tasks, Locations: locations(), Trace: p.Trace},
		func(ctx context.Context, t *orwl.Task) error {
			r, err := runTask(ctx, t, p)
			if r != nil {
				result = r
			}
			return err
		})
	return result, err
}

// task is one task's part of the job, declared before the schedule.
type task struct {
	p       Params
	b       []byte              // the band of B
	c1      int                 // the column right of the band
	in, out [Slots]*orwl.Handle // the left neighbour's edges (nil in task 0), mine (nil in the last task)
	publish *orwl.Handle        // the last task writes the result
	gather  *orwl.Handle        // task 0 reads it
	rows    int                 // rows per block, at most len(A)
}

// declare sizes t's locations and declares its handles.
func declare(t *orwl.Task, p Params) *task {
	k, last := t.ID(), p.Tasks-1
	c0, c1 := Band(len(p.B), p.Tasks, k)
	w := &task{p: p, b: p.B[c0:c1], c1: c1, rows: max(1, min(p.Block, len(p.A)))}
	for s := range Slots {
		if k > 0 {
			w.in[s] = t.ReadInsert(t.Loc(k-1, edgeName(s)), 2*s+1)
		}
		if k < last { // the last task's edges would have no reader
			t.Scale(edgeName(s), 8*(w.rows+1))
			w.out[s] = t.WriteInsert(t.Loc(k, edgeName(s)), 2*s)
		}
	}
	t.Scale("result", 16) // the distance, then the seconds
	if k == last {
		w.publish = t.WriteInsertOnce(t.Loc(k, "result"), 0)
	}
	if k == 0 {
		w.gather = t.ReadInsertOnce(t.Loc(last, "result"), 1)
	}
	return w
}

// runTask runs task t: its blocks, then the report of the result. It returns the result
// in task 0, nil in the others.
func runTask(ctx context.Context, t *orwl.Task, p Params) (*Result, error) {
	w := declare(t, p)
	if err := t.Schedule(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	dist, err := w.blocks(ctx)
	if err != nil {
		return nil, err
	}
	if w.publish != nil {
		seconds := time.Since(start).Seconds()
		if err := w.publish.Section(ctx, func(data []byte) error {
			v := orwl.Float64s(data)
			v[0], v[1] = float64(dist), seconds
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if w.gather == nil {
		return nil, nil
	}
	var r Result
	err = w.gather.Section(ctx, func(data []byte) error {
		v := orwl.Float64s(data)
		r.Distance, r.Seconds = int(v[0]), v[1]
		return nil
	})
	return &r, err
}

// blocks computes the task's tiles, block after block, and returns the value at the bottom
// of its right edge: the distance in the last task.
func (w *task) blocks(ctx context.Context) (int, error) {
	a := w.p.A
	row := make([]uint32, len(w.b))
	c0 := w.c1 - len(w.b)
	for j := range row {
		row[j] = uint32(c0 + j + 1) // D[0][c0+1+j]
	}
	in, out := make([]uint32, w.rows+1), make([]uint32, w.rows+1)
	bottom := uint32(w.c1) // D[0][c1], when A is empty
	for r, i0 := 0, 0; i0 < len(a); r, i0 = r+1, i0+w.rows {
		i1 := min(i0+w.rows, len(a))
		h := i1 - i0
		slot := r % Slots
		if err := w.left(ctx, slot, i0, in[:h+1]); err != nil {
			return 0, err
		}
		tile(a[i0:i1], w.b, row, in, out)
		bottom = out[h]
		if w.out[slot] == nil {
			continue
		}
		if err := w.out[slot].Section(ctx, func(data []byte) error {
			e := orwl.Uint64s(data)[:h+1]
			for i, v := range out[:h+1] {
				e[i] = uint64(v)
			}
			return nil
		}); err != nil {
			return 0, err
		}
		// Let the other goroutines of this process run now: the runtime's, which send the
		// edge to another process, and the task's right neighbour when it shares the
		// process's Ps (GOMAXPROCS = cores / processes), which can start the block only now.
		runtime.Gosched()
	}
	return int(bottom), nil
}

// left fills in with D[i0..i0+len(in)-1][c0], the column left of the band: i in task 0,
// else the edge that task k-1 published in slot.
func (w *task) left(ctx context.Context, slot, i0 int, in []uint32) error {
	if w.in[slot] == nil {
		for i := range in {
			in[i] = uint32(i0 + i)
		}
		return nil
	}
	return w.in[slot].Section(ctx, func(data []byte) error {
		e := orwl.Uint64s(data)
		if len(e) < len(in) {
			return errors.New("wavefront: the left neighbour's edge is too short")
		}
		for i := range in {
			in[i] = uint32(e[i])
		}
		return nil
	})
}

// Sequential computes the distance of a and b in one loop over the rows of the matrix,
// with the inner loop of the tasks and one row array: the Go reference of the bench.
func Sequential(a, b []byte) int {
	row := make([]uint32, len(b))
	for j := range row {
		row[j] = uint32(j + 1)
	}
	in, out := make([]uint32, len(a)+1), make([]uint32, len(a)+1)
	for i := range in {
		in[i] = uint32(i)
	}
	tile(a, b, row, in, out)
	return int(out[len(a)])
}

// Alphabet is the alphabet of generated strings.
const Alphabet = "ACGT"

// Generate returns n characters of Alphabet drawn from a generator seeded with seed: the
// same string for the same n and seed, on every machine and in every process.
func Generate(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	s := make([]byte, n)
	for i := range s {
		s[i] = Alphabet[r.Uint64()>>62]
	}
	return s
}
