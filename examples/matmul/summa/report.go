package summa

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// report is what a task tells task 0 at the end, through its location "out" (one-shot
// write at position 0, read by task 0 at position 1): its measurements and its share of
// the checks' data. It travels as binary.LittleEndian: reportHeader, then Times, Y, Z,
// Bound and C, whose lengths the header gives.
type report struct {
	reportHeader
	Times       []time.Duration // my part of each multiplication (see Result.Seconds)
	Y, Z, Bound []float64       // Freivalds: my partial sums for my rows (see freivalds)
	C           []float64       // Exact: my part of C, row-major
}

// reportHeader is the fixed part of a report.
type reportHeader struct {
	Start, End    int64 // UnixNano: my start (A and B generated), my last multiplication's end
	Compute, Wait time.Duration
	BytesIn       int64
	Flops         float64
	Checksum      uint64   // fnv-64a of the bits of my part of C
	Span          [2]int64 // my first column of C and one past my last (0, 0: none)
	Faults        [2]int64 // my process's page faults at my start and at my first multiplication's end
	NTimes, NSums int64    // the lengths of Times, and of each of Y, Z and Bound
	NC            int64    // the length of C
}

// reportSize is the size in bytes of the "out" location of a task with an mloc x nloc
// part of C: room for its report.
func reportSize(p *Params, mloc, nloc int) int {
	n := p.Reps
	if p.Verify&Freivalds != 0 {
		n += 3 * mloc
	}
	if p.Verify&Exact != 0 {
		if p.balanced() {
			nloc = p.N // the final range is not known yet
		}
		n += mloc * nloc
	}
	return binary.Size(reportHeader{}) + 8*n
}

// parts are the pieces of r in the order they travel.
func (r *report) parts() []any { return []any{&r.reportHeader, r.Times, r.Y, r.Z, r.Bound, r.C} }

// encode writes r at the start of b, which must hold reportSize bytes.
func (r *report) encode(b []byte) error {
	r.NTimes, r.NSums, r.NC = int64(len(r.Times)), int64(len(r.Y)), int64(len(r.C))
	if len(r.Z) != len(r.Y) || len(r.Bound) != len(r.Y) {
		return errors.New("summa: report: Freivalds sums of different lengths")
	}
	for _, part := range r.parts() {
		n, err := binary.Encode(b, binary.LittleEndian, part)
		if err != nil {
			return fmt.Errorf("summa: report: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// decode reads a report written by encode at the start of b.
func (r *report) decode(b []byte) error {
	n, err := binary.Decode(b, binary.LittleEndian, &r.reportHeader)
	if err != nil {
		return fmt.Errorf("summa: report: %w", err)
	}
	b = b[n:]
	room := int64(len(b) / 8)
	if r.NTimes < 0 || r.NSums < 0 || r.NC < 0 || r.NTimes > room || r.NSums > room || r.NC > room ||
		r.NTimes+3*r.NSums+r.NC > room {
		return fmt.Errorf("summa: report: lengths %d, 3x%d and %d do not fit in %d bytes", r.NTimes, r.NSums, r.NC, len(b))
	}
	r.Times = make([]time.Duration, r.NTimes)
	r.Y, r.Z, r.Bound = make([]float64, r.NSums), make([]float64, r.NSums), make([]float64, r.NSums)
	r.C = make([]float64, r.NC)
	for _, part := range r.parts()[1:] {
		n, err := binary.Decode(b, binary.LittleEndian, part)
		if err != nil {
			return fmt.Errorf("summa: report: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// report returns my report, after compute.
func (w *worker) report() *report {
	h := fnv.New64a()
	h.Write(orwl.Bytes(w.c))
	r := &report{reportHeader: reportHeader{
		Start:    w.start.UnixNano(),
		End:      w.stop.UnixNano(),
		Compute:  w.stats.Compute,
		Wait:     w.stats.Wait,
		BytesIn:  w.stats.BytesIn,
		Flops:    w.stats.Flops,
		Checksum: h.Sum64(),
		Faults:   w.faults,
	}}
	if len(w.cols) > 0 {
		r.Span = [2]int64{int64(w.cols[0]), int64(w.cols[len(w.cols)-1] + 1)}
	}
	prev := w.start
	for _, end := range w.repEnds {
		r.Times = append(r.Times, end.Sub(prev))
		prev = end
	}
	if w.p.Verify&Freivalds != 0 {
		m := len(w.rows)
		r.Y, r.Z, r.Bound = make([]float64, m), make([]float64, m), make([]float64, m)
		w.freivalds(r.Y, r.Z, r.Bound)
	}
	if w.p.Verify&Exact != 0 {
		r.C = w.c
	}
	return r
}

// collect is task 0's end: read every task's report, check and sum up.
func (w *worker) collect(ctx context.Context) (*Result, error) {
	tl := newTally(w.p)
	for k, h := range w.gather {
		if err := h.Section(ctx, func(b []byte) error {
			var r report
			if err := r.decode(b); err != nil {
				return fmt.Errorf("task %d: %w", k, err)
			}
			return tl.add(k, w.t.ProcOf(k), &r, w.s.columns(k, &r))
		}); err != nil {
			return nil, err
		}
	}
	res := tl.result()
	res.Tasks[0].Kernel = w.stats.Kernel
	ok := w.p.Verify != 0
	if tl.y != nil {
		ok = tl.freivalds(res) && ok
	}
	if tl.full != nil {
		ok = tl.exact(res, w.gemm) && ok
	}
	res.Verified = ok
	return res, nil
}

// tally adds up the reports of every task, at task 0.
type tally struct {
	p                 *Params
	res               Result
	first, last       int64            // UnixNano: the first start, the last end
	times             []float64        // the slowest task's seconds for each multiplication
	faults            map[int][2]int64 // by process: the first start's count, the last end's
	sums              hash.Hash64      // of every task's checksum
	y, z, bound, full []float64        // the checks' data, when asked for
}

func newTally(p *Params) *tally {
	tl := &tally{p: p, first: math.MaxInt64, last: math.MinInt64, times: make([]float64, p.Reps),
		faults: map[int][2]int64{}, sums: fnv.New64a()}
	if p.Verify&Freivalds != 0 {
		tl.y, tl.z, tl.bound = make([]float64, p.N), make([]float64, p.N), make([]float64, p.N)
	}
	if p.Verify&Exact != 0 {
		tl.full = make([]float64, p.N*p.N)
	}
	return tl
}

// add counts the report r of task k, which runs in process proc and holds the columns
// cols of C.
func (tl *tally) add(k, proc int, r *report, cols []int) error {
	p := tl.p
	pk, _ := p.Grid.Coords(k)
	rows := globals(p.N, p.NB, pk, p.Grid.P)
	if err := tl.fits(k, r, len(rows), len(cols)); err != nil {
		return err
	}
	if p.balanced() {
		tl.res.Split = append(tl.res.Split, float64(len(cols))/float64(p.N))
	}
	tl.first, tl.last = min(tl.first, r.Start), max(tl.last, r.End)
	f, seen := tl.faults[proc]
	if !seen {
		f = [2]int64{math.MaxInt64, math.MinInt64}
	}
	tl.faults[proc] = [2]int64{min(f[0], r.Faults[0]), max(f[1], r.Faults[1])}
	tl.res.Tasks = append(tl.res.Tasks, TaskStats{Kernel: p.Kernels[k], Compute: r.Compute, Wait: r.Wait, BytesIn: r.BytesIn, Flops: r.Flops})
	tl.sums.Write(binary.LittleEndian.AppendUint64(nil, r.Checksum))
	for i, d := range r.Times {
		tl.times[i] = max(tl.times[i], d.Seconds())
	}
	for i, gi := range rows {
		if tl.y != nil {
			tl.y[gi] += r.Y[i]
			tl.z[gi] += r.Z[i]
			tl.bound[gi] += r.Bound[i]
		}
		if tl.full != nil {
			for j, gj := range cols {
				tl.full[gi*p.N+gj] = r.C[i*len(cols)+j]
			}
		}
	}
	return nil
}

// fits checks that the report r of task k, with m rows and n columns of C, has the parts
// that the job asks for.
func (tl *tally) fits(k int, r *report, m, n int) error {
	switch {
	case len(r.Times) != tl.p.Reps:
		return fmt.Errorf("summa: task %d reports %d multiplications, not %d", k, len(r.Times), tl.p.Reps)
	case tl.y != nil && len(r.Y) != m:
		return fmt.Errorf("summa: task %d reports Freivalds sums for %d rows, not %d", k, len(r.Y), m)
	case tl.full != nil && len(r.C) != m*n:
		return fmt.Errorf("summa: task %d reports %d entries of C, not %dx%d", k, len(r.C), m, n)
	}
	return nil
}

// result sums up the timings and the checksum.
func (tl *tally) result() *Result {
	res := &tl.res
	p := tl.p
	res.MeanSeconds = float64(tl.last-tl.first) / 1e9 / float64(p.Reps)
	res.Seconds = slices.Min(tl.times)
	res.FirstSeconds = tl.times[0]
	for _, f := range tl.faults {
		res.FirstFaults += f[1] - f[0]
	}
	res.GFlops = Flops(p.N) / res.Seconds / 1e9
	res.Checksum = tl.sums.Sum64()
	res.Checks = "none"
	return res
}

// freivalds checks C·x against A·(B·x), row by row, and reports whether it passes.
func (tl *tally) freivalds(res *Result) bool {
	res.Checks = "freivalds"
	ok := true
	eps := math.Nextafter(1, 2) - 1
	for i := range tl.y {
		tol := 4*float64(tl.p.N)*eps*tl.bound[i] + math.SmallestNonzeroFloat64
		r := math.Abs(tl.y[i]-tl.z[i]) / tol
		if !(r <= 1) {
			ok = false
		}
		if !(r <= res.FreivaldsRatio) {
			res.FreivaldsRatio = r
		}
	}
	return ok
}

// exact compares the gathered C with one call of gemm on the whole of A and B, and
// reports whether it passes.
func (tl *tally) exact(res *Result, gemm kernels.Gemm) bool {
	n := tl.p.N
	if res.Checks == "none" {
		res.Checks = "exact"
	} else {
		res.Checks += "+exact"
	}
	a, b, ref := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range n {
		for j := range n {
			a[i*n+j] = MatrixA(tl.p.Seed, n, i, j)
			b[i*n+j] = MatrixB(tl.p.Seed, n, i, j)
		}
	}
	gemm.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, ref, n)
	// Entries lie in [-1, 1), so |A||B| <= N entrywise; the two results differ only by
	// rounding, at most about 2Nε|A||B|.
	eps := math.Nextafter(1, 2) - 1
	tol := 4 * float64(n) * eps * float64(n)
	ok := true
	for i := range ref {
		d := math.Abs(tl.full[i] - ref[i])
		if !(d <= tol) {
			ok = false
		}
		if !(d <= res.ExactErr) {
			res.ExactErr = d
		}
	}
	return ok
}
