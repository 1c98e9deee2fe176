package tiled

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// Header fields of a task's "out" location, in float64 slots; the factorisation times,
// then the task's parts of L·z and of A·x follow.
const (
	hCompute = iota // seconds
	hWait
	hRelease
	hFlops
	hChecksum // bits
	hNormA2
	hLen
)

// outLen is the size of a task's "out" location, in float64s.
func (w *worker) outLen() int { return hLen + w.p.Reps + 2*w.p.N }

// declareVerification inserts the handles of the check, from position base: my tiles read
// and my "z" written (base), everybody's "z" read (base+1), my tiles read and my "out"
// written (base+2), and for task 0 everybody's "out" read (base+3).
func (w *worker) declareVerification(base int) {
	t := w.t
	for _, tl := range w.mine {
		w.tilesV = append(w.tilesV, t.ReadInsertOnce(w.loc(tl), base))
	}
	w.zW = t.WriteInsertOnce(t.Loc(w.me, "z"), base)
	for k := range t.NumTasks() {
		w.zR = append(w.zR, t.ReadInsertOnce(t.Loc(k, "z"), base+1))
	}
	for _, tl := range w.mine {
		w.tilesY = append(w.tilesY, t.ReadInsertOnce(w.loc(tl), base+2))
	}
	w.outW = t.WriteInsertOnce(t.Loc(w.me, "out"), base+2)
	if w.me == 0 {
		for k := range t.NumTasks() {
			w.outR = append(w.outR, t.ReadInsertOnce(t.Loc(k, "out"), base+3))
		}
	}
}

// verify publishes my parts of z = Lᵀ·x, then, from the sum of everybody's, of y = L·z
// with my statistics; task 0 gathers them and returns the Result.
func (w *worker) verify(ctx context.Context) (*Result, error) {
	p, l, x := w.p, w.l, w.x
	sum := fnv.New64a()
	if err := w.zW.Section(ctx, func(b []byte) error {
		z := orwl.Float64s(b)
		clear(z)
		return w.eachTile(ctx, w.tilesV, func(tl tile, a []float64) {
			sum.Write(orwl.Bytes(a))
			l.lowerProduct(tl, a, x, z, true)
		})
	}); err != nil {
		return nil, err
	}
	z := make([]float64, p.N)
	for _, h := range w.zR { // every task adds the parts in the same order: the same z
		if err := h.Section(ctx, func(b []byte) error {
			for i, v := range orwl.Float64s(b) {
				z[i] += v
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := w.outW.Section(ctx, func(b []byte) error {
		out := orwl.Float64s(b)
		clear(out)
		out[hCompute], out[hWait], out[hRelease] = w.stats.Compute.Seconds(), w.stats.Wait.Seconds(), w.stats.Release.Seconds()
		out[hFlops] = w.stats.Flops
		out[hChecksum], out[hNormA2] = math.Float64frombits(sum.Sum64()), w.normA2
		for r, d := range w.ends {
			out[hLen+r] = d.Seconds()
		}
		y := out[hLen+p.Reps : hLen+p.Reps+p.N]
		copy(out[hLen+p.Reps+p.N:], w.ax)
		return w.eachTile(ctx, w.tilesY, func(tl tile, a []float64) { l.lowerProduct(tl, a, z, y, false) })
	}); err != nil {
		return nil, err
	}
	if w.me != 0 {
		return nil, nil
	}
	return w.collect(ctx, x)
}

// eachTile reads each of my tiles through its handle in hs and calls fn on it.
func (w *worker) eachTile(ctx context.Context, hs []*orwl.Handle, fn func(tile, []float64)) error {
	for x, h := range hs {
		if err := h.Section(ctx, func(b []byte) error {
			tl := w.mine[x]
			fn(tl, orwl.Float64s(b)[:w.l.width(tl.i)*w.l.width(tl.j)])
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// lowerProduct adds to out the product of the L part of tile tl (its lower triangle on the
// diagonal) with in: transposed (out_j += L(i,j)ᵀ·in_i) or not (out_i += L(i,j)·in_j).
func (l layout) lowerProduct(tl tile, a, in, out []float64, transposed bool) {
	wi, wj := l.width(tl.i), l.width(tl.j)
	i0, j0 := tl.i*l.nb, tl.j*l.nb
	for r := range wi {
		cols := wj
		if tl.i == tl.j {
			cols = r + 1
		}
		row := a[r*wj : r*wj+cols]
		if transposed {
			for c, v := range row {
				out[j0+c] += v * in[i0+r]
			}
			continue
		}
		var s float64
		for c, v := range row {
			s += v * in[j0+c]
		}
		out[i0+r] += s
	}
}

// collect is task 0's end: read every task's "out", and compute the times and the
// residual.
func (w *worker) collect(ctx context.Context, x []float64) (*Result, error) {
	p := w.p
	y, ax := make([]float64, p.N), make([]float64, p.N)
	reps := make([]float64, p.Reps) // the slowest task's time of each factorisation
	sums := fnv.New64a()
	res := &Result{}
	var normA2 float64
	for _, h := range w.outR {
		if err := h.Section(ctx, func(b []byte) error {
			out := orwl.Float64s(b)
			res.Tasks = append(res.Tasks, TaskStats{
				Compute: time.Duration(out[hCompute] * 1e9),
				Wait:    time.Duration(out[hWait] * 1e9),
				Release: time.Duration(out[hRelease] * 1e9),
				Flops:   out[hFlops],
			})
			sums.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(out[hChecksum])))
			normA2 += out[hNormA2]
			for r := range reps {
				reps[r] = max(reps[r], out[hLen+r])
			}
			rest := out[hLen+p.Reps:]
			for i := range y {
				y[i] += rest[i]
				ax[i] += rest[p.N+i]
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	res.Seconds, res.FirstSeconds = slices.Min(reps), reps[0]
	res.GFlops, res.FirstGFlops = Flops(p.N)/res.Seconds/1e9, Flops(p.N)/res.FirstSeconds/1e9
	res.Checksum = sums.Sum64()
	res.Residual = ScaledResidual(ax, y, x, normA2)
	res.Verified = res.Residual < ResidualBound
	return res, nil
}

// ScaledResidual is the residual of Result: √n·‖ax − y‖₂ / (‖x‖₂·‖A‖_F·n·ε), where ax is
// A·x and y is L·(Lᵀ·x) for the factor L of A, and normA2 is ‖A‖_F².
func ScaledResidual(ax, y, x []float64, normA2 float64) float64 {
	var r2, x2 float64
	for i := range y {
		r2 += (ax[i] - y[i]) * (ax[i] - y[i])
		x2 += x[i] * x[i]
	}
	eps := math.Nextafter(1, 2) - 1
	n := float64(len(x))
	return math.Sqrt(n) * math.Sqrt(r2) / math.Sqrt(x2) / (math.Sqrt(normA2) * n * eps)
}
