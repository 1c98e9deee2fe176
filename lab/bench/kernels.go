package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"

	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
	"github.com/orwl-go/orwl/kernels/cublas"
	"github.com/orwl-go/orwl/kernels/openblas"
)

func init() {
	register(command{
		name:    "kernels",
		summary: "GFLOP/s of the DGEMM kernel plugins against their references",
		files:   []string{"kernels.svg", "kernels.json"},
		setup:   kernelsSetup,
	})
}

// Default sizes: CPU rows stop at 4096, GPU rows go on to 16384.
var (
	cpuSizes = []int{256, 512, 1024, 2048, 4096}
	gpuSizes = []int{256, 512, 1024, 2048, 4096, 8192, 16384}
)

// timer runs reps timed calls and returns their total duration.
type timer func(reps int) (time.Duration, error)

// row is one line of the benchmark: a plugin (possibly in a particular mode)
// or a reference it is compared with.
type row struct {
	name    string
	device  kernels.Device
	threads int
	ref     string // for plugin rows, the reference row they are compared with
	sizes   []int
	// prepare sets the row up for size n on the shared operands; the
	// returned cleanup releases what it allocated.
	prepare func(n int, op *operands) (timer, func(), error)
}

// operands are the host matrices of one size, shared by the CPU rows.
type operands struct {
	n       int
	a, b, c []float64
}

func newOperands(n int) *operands {
	op := &operands{n: n, a: make([]float64, n*n), b: make([]float64, n*n), c: make([]float64, n*n)}
	fill(op.a, 17)
	fill(op.b, 13)
	return op
}

// fill writes cheap deterministic values in [-0.5, 0.5).
func fill(s []float64, mod int) {
	for i := range s {
		s[i] = float64(i%mod)/float64(mod) - 0.5
	}
}

// result is one measurement, printed as a JSON object with -json.
type result struct {
	Kernel    string  `json:"kernel"`
	N         int     `json:"n"`
	Threads   int     `json:"threads"`
	GFlops    float64 `json:"gflops"`
	Median    float64 `json:"median_gflops"`
	Seconds   float64 `json:"seconds"`
	Reps      int     `json:"reps"`
	Samples   int     `json:"samples"`
	Device    string  `json:"device"`
	Reference bool    `json:"reference"`
	Ref       string  `json:"ref,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
}

type kernelsFlags struct {
	sizes    []int
	names    []string
	threads  int
	json     bool
	out      string
	minTime  time.Duration
	rounds   int
	refs     bool
	crefPath string
	profile  string
	tmp      string // scratch folder, removed at the end
}

// kernelsSetup declares the flags of the kernels command and returns its body.
func kernelsSetup(fs *flag.FlagSet) func(rep *report) error {
	sizes := fs.String("n", "", "comma-separated matrix sizes N (N×N×N DGEMM); default 256..4096 on CPU, 256..16384 on GPU")
	names := fs.String("kernels", "", "comma-separated plugins to measure (gonum, openblas, cublas); default all available")
	f := &kernelsFlags{}
	fs.IntVar(&f.threads, "threads", 0, "host threads per kernel call (0: each library's default); gonum follows GOMAXPROCS, set to it")
	fs.DurationVar(&f.minTime, "time", 2*time.Second, "minimum measured time per row and size, split over the rounds")
	fs.IntVar(&f.rounds, "rounds", 3, "interleaved rounds (the best round is reported; plugin and reference alternate)")
	fs.BoolVar(&f.refs, "refs", true, "also measure the references (C cblas_dgemm, gonum direct, raw cuBLAS)")
	fs.StringVar(&f.crefPath, "cref", "", "prebuilt C reference program (default: build it with gcc)")
	fs.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return func(rep *report) error {
		if *sizes != "" {
			var err error
			if f.sizes, err = intList(*sizes); err != nil {
				return badFlags("-n: %w", err)
			}
		}
		f.names = splitList(*names)
		f.rounds = max(1, f.rounds)
		f.json, f.out = rep.asJSON, rep.out
		return benchKernels(f)
	}
}

// benchKernels measures the kernels as f says.
func benchKernels(f *kernelsFlags) error {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "orwl-bench")
	if err != nil {
		return err
	}
	f.tmp = tmp
	defer os.RemoveAll(f.tmp)
	if f.profile != "" {
		fh, err := os.Create(f.profile)
		if err != nil {
			return err
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rows, closeRows, err := buildRows(f)
	defer closeRows()
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return errors.New("no kernel to measure")
	}
	var sizes []int
	for _, r := range rows {
		sizes = append(sizes, r.sizes...)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)

	var results []result
	const format = "%6s  %-18s %-6s %7s %10s %10s %6s  %s\n"
	if !f.json {
		fmt.Printf(format, "N", "kernel", "device", "threads", "GFLOP/s", "median", "ratio", "reference")
	}
	for _, n := range sizes {
		rs, err := measureSize(f, rows, n)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if f.json {
				printJSON(r)
				continue
			}
			ratio := ""
			if r.Ref != "" {
				ratio = fmt.Sprintf("%.3f", r.Ratio)
			}
			fmt.Printf(format, strconv.Itoa(r.N), r.Kernel, r.Device, strconv.Itoa(r.Threads),
				fmt.Sprintf("%.1f", r.GFlops), fmt.Sprintf("%.1f", r.Median), ratio, r.Ref)
		}
		results = append(results, rs...)
	}
	if err := writeResults(f.out, results); err != nil {
		return err
	}
	return chart(f.out, results)
}

// measureSize prepares every row running at size n, then measures them in
// interleaved rounds so that slow drifts of a noisy machine hit plugin and
// reference alike. A row's figure is its best round.
func measureSize(f *kernelsFlags, rows []row, n int) ([]result, error) {
	flops := 2 * math.Pow(float64(n), 3)
	var op *operands
	type live struct {
		row     *row
		t       timer
		reps    int
		samples []float64 // seconds per call
	}
	var lives []*live
	var cleanups []func()
	share := f.minTime / time.Duration(f.rounds) // measured time per row and round
	defer func() {
		for _, c := range cleanups {
			c()
		}
	}()
	for i := range rows {
		r := &rows[i]
		if !slices.Contains(r.sizes, n) {
			continue
		}
		if op == nil && r.device == kernels.CPU {
			op = newOperands(n)
		}
		t, cleanup, err := r.prepare(n, op)
		if err != nil {
			fmt.Fprintf(os.Stderr, "skip %s at N=%d: %v\n", r.name, n, err)
			continue
		}
		cleanups = append(cleanups, cleanup)
		// Warm up once; a call slower than a round's share counts as a
		// sample instead of being repeated.
		d, err := t(1)
		if err != nil {
			return nil, fmt.Errorf("%s N=%d: %w", r.name, n, err)
		}
		l := &live{row: r, t: t, reps: 1}
		if d >= share {
			l.samples = append(l.samples, d.Seconds())
		} else {
			l.reps = max(1, int(share/max(d, time.Microsecond)))
		}
		lives = append(lives, l)
	}
	for range f.rounds {
		for _, l := range lives {
			if len(l.samples) >= f.rounds {
				continue
			}
			d, err := l.t(l.reps)
			if err != nil {
				return nil, fmt.Errorf("%s N=%d: %w", l.row.name, n, err)
			}
			l.samples = append(l.samples, d.Seconds()/float64(l.reps))
		}
	}
	var out []result
	best := map[string]float64{}
	for _, l := range lives {
		s := slices.Sorted(slices.Values(l.samples))
		r := result{
			Kernel: l.row.name, N: n, Threads: l.row.threads, GFlops: flops / s[0] / 1e9,
			Median: flops / s[len(s)/2] / 1e9, Seconds: s[0], Reps: l.reps, Samples: len(s),
			Device: l.row.device.String(), Reference: strings.HasPrefix(l.row.name, "ref:"), Ref: l.row.ref,
		}
		best[r.Kernel] = r.GFlops
		out = append(out, r)
	}
	for i := range out {
		if ref, ok := best[out[i].Ref]; ok {
			out[i].Ratio = out[i].GFlops / ref
		} else {
			out[i].Ref = ""
		}
	}
	return out, nil
}

// buildRows returns the rows for the selected plugins, with their
// references, and a function releasing the kernels.
func buildRows(f *kernelsFlags) ([]row, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	names := f.names
	if len(names) == 0 {
		names = kernels.Available()
	}
	var rows []row
	for _, name := range names {
		g, err := kernels.Get(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "skip %s: %v\n", name, err)
			continue
		}
		if c, ok := g.(io.Closer); ok {
			closers = append(closers, func() { c.Close() })
		}
		// gonum refuses: its rows set GOMAXPROCS instead.
		if err := setThreads(g, f.threads); err != nil {
			return nil, closeAll, err
		}
		sizes := f.sizes
		if k, ok := g.(*cublas.Kernel); ok {
			if sizes == nil {
				sizes = gpuSizes
			}
			rows = append(rows, cublasRows(k, sizes, f.refs)...)
			continue
		}
		if sizes == nil {
			sizes = cpuSizes
		}
		switch g.Name() {
		case "gonum":
			rows = append(rows, gonumRows(g, sizes, f)...)
		case "openblas":
			rs, err := openblasRows(g, sizes, f)
			if err != nil {
				return nil, closeAll, err
			}
			rows = append(rows, rs...)
		default:
			rows = append(rows, row{name: g.Name(), device: g.Device(), threads: g.Threads(), sizes: sizes, prepare: hostGemm(g.Dgemm)})
		}
	}
	return rows, closeAll, nil
}

// dgemmFunc is a Dgemm method: a plugin's (kernels.Gemm) or gonum's own.
type dgemmFunc func(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int)

// hostGemm times C = A·B with dgemm on the shared host operands.
func hostGemm(dgemm dgemmFunc) func(int, *operands) (timer, func(), error) {
	return func(n int, op *operands) (timer, func(), error) {
		return func(reps int) (time.Duration, error) {
			start := time.Now()
			for range reps {
				dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, op.a, n, op.b, n, 0, op.c, n)
			}
			return time.Since(start), nil
		}, func() {}, nil
	}
}

// withProcs runs t with GOMAXPROCS set to procs (when > 0): gonum's
// parallelism follows GOMAXPROCS.
func withProcs(procs int, t timer) timer {
	if procs <= 0 {
		return t
	}
	return func(reps int) (time.Duration, error) {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		return t(reps)
	}
}

// gonumRows returns the gonum plugin's row and, with -refs, gonum's Dgemm
// called directly; both run with GOMAXPROCS set to -threads.
func gonumRows(g kernels.Gemm, sizes []int, f *kernelsFlags) []row {
	threads := f.threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	gonumRow := func(name string, dgemm dgemmFunc) row {
		prepare := hostGemm(dgemm)
		return row{name: name, device: kernels.CPU, threads: threads, sizes: sizes,
			prepare: func(n int, op *operands) (timer, func(), error) {
				t, c, err := prepare(n, op)
				return withProcs(f.threads, t), c, err
			}}
	}
	rows := []row{gonumRow("gonum", g.Dgemm)}
	if !f.refs {
		return rows
	}
	rows[0].ref = "ref:gonum"
	return append(rows, gonumRow("ref:gonum", gonumblas.Implementation{}.Dgemm))
}

func openblasRows(g kernels.Gemm, sizes []int, f *kernelsFlags) ([]row, error) {
	if _, cfg := g.(*openblas.Kernel).Library(); strings.Contains(cfg, "Prescott") {
		fmt.Fprintln(os.Stderr, "openblas: OpenBLAS did not recognize this CPU and uses its generic Prescott (SSE3) kernels;"+
			" set OPENBLAS_CORETYPE (e.g. SkylakeX for AVX-512, Haswell for AVX2) for full speed. Plugin and C reference share the setting.")
	}
	rows := []row{{name: "openblas", device: kernels.CPU, threads: g.Threads(), sizes: sizes, prepare: hostGemm(g.Dgemm)}}
	if !f.refs {
		return rows, nil
	}
	c, err := buildCref(f.tmp, f.crefPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "skip ref:openblas-c: %v\n", err)
		return rows, nil
	}
	path, cfg := g.(*openblas.Kernel).Library()
	fmt.Fprintf(os.Stderr, "openblas: %s (%s); C reference %s\n", path, cfg, c.path)
	rows[0].ref = "ref:openblas-c"
	threads := g.Threads()
	return append(rows, row{name: "ref:openblas-c", device: kernels.CPU, threads: threads, sizes: sizes,
		prepare: func(n int, _ *operands) (timer, func(), error) {
			return func(reps int) (time.Duration, error) { return c.run(n, threads, reps) }, func() {}, nil
		}}), nil
}

// cublasRows returns the GPU rows: host-to-host Dgemm on Go slices and on
// pinned slices (compared with max(raw compute, pinned transfers)), and
// device-resident Gemm (compared with a raw cublasDgemm loop).
func cublasRows(g *cublas.Kernel, sizes []int, refs bool) []row {
	rows := []row{
		{name: "cublas", device: kernels.GPU, threads: 1, sizes: sizes, prepare: cublasHost(g, false)},
		{name: "cublas-pinned", device: kernels.GPU, threads: 1, sizes: sizes, prepare: cublasHost(g, true)},
		{name: "cublas-resident", device: kernels.GPU, threads: 1, sizes: sizes, prepare: cublasResident(g)},
	}
	if !refs {
		return rows
	}
	raw, err := newRawCUDA()
	if err != nil {
		fmt.Fprintf(os.Stderr, "skip raw cuBLAS references: %v\n", err)
		return rows
	}
	rows[0].ref, rows[1].ref, rows[2].ref = "ref:cuda-h2h-bound", "ref:cuda-h2h-bound", "ref:cublas-raw"
	rawRow := func(name string, t func(b *rawBufs, reps int) (time.Duration, error)) row {
		return row{name: name, device: kernels.GPU, threads: 1, sizes: sizes,
			prepare: func(n int, _ *operands) (timer, func(), error) {
				b, err := raw.alloc(n)
				if err != nil {
					return nil, nil, err
				}
				return func(reps int) (time.Duration, error) { return t(b, reps) }, func() { raw.release(b) }, nil
			}}
	}
	bound := func(b *rawBufs, reps int) (time.Duration, error) {
		tc, err := raw.gemm(b, reps)
		if err != nil {
			return 0, err
		}
		tt, err := raw.transfer(b, reps)
		return max(tc, tt), err
	}
	return append(rows, rawRow("ref:cublas-raw", raw.gemm), rawRow("ref:cuda-h2h-bound", bound))
}

// cublasHost times host-slice Dgemm on fresh Go slices or pinned slices.
func cublasHost(g *cublas.Kernel, pinned bool) func(int, *operands) (timer, func(), error) {
	return func(n int, _ *operands) (timer, func(), error) {
		var s [3][]float64
		free := func() {
			for _, x := range s {
				if pinned && x != nil {
					cublas.FreeHost(x)
				}
			}
		}
		for i := range s {
			if !pinned {
				s[i] = make([]float64, n*n)
			} else {
				var err error
				if s[i], err = cublas.AllocHost(n * n); err != nil {
					free()
					return nil, nil, err
				}
			}
		}
		fill(s[0], 17)
		fill(s[1], 13)
		return func(reps int) (time.Duration, error) {
			start := time.Now()
			for range reps {
				if err := g.DgemmErr(blas.NoTrans, blas.NoTrans, n, n, n, 1, s[0], n, s[1], n, 0, s[2], n); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		}, free, nil
	}
}

// cublasResident times Kernel.Gemm on device-resident matrices uploaded
// once, synchronizing once per batch.
func cublasResident(g *cublas.Kernel) func(int, *operands) (timer, func(), error) {
	return func(n int, _ *operands) (timer, func(), error) {
		var mats []*cublas.Matrix
		free := func() {
			for _, m := range mats {
				m.Free()
			}
		}
		host := make([]float64, n*n)
		for i := range 3 {
			m, err := g.NewMatrix(n, n)
			if err != nil {
				free()
				return nil, nil, err
			}
			mats = append(mats, m)
			fill(host, 13+4*i)
			if err := m.Upload(host, n); err != nil {
				free()
				return nil, nil, err
			}
		}
		return func(reps int) (time.Duration, error) {
			start := time.Now()
			for range reps {
				if err := g.Gemm(blas.NoTrans, blas.NoTrans, 1, mats[0], mats[1], 0, mats[2]); err != nil {
					return 0, err
				}
			}
			err := g.Sync()
			return time.Since(start), err
		}, free, nil
	}
}

// writeResults writes every measurement as JSON lines to out/kernels.json.
func writeResults(out string, results []result) error {
	fh, err := os.Create(filepath.Join(out, "kernels.json"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(fh)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			fh.Close()
			return err
		}
	}
	return fh.Close()
}
