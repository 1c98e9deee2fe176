package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels/cublas"
)

// gpu: the figures of a machine with an NVIDIA GPU, in one run, each against its reference
// measured in the same run:
//
//   - summa: the 2-D SUMMA of examples/matmul in one task on the cuBLAS kernel, which keeps
//     C on the device across the steps (kernels.Accumulator) and uploads each step's panels
//     from pinned memory while the previous products compute, host to host, against
//     max(one cublasDgemm on device-resident operands, the pinned transfers a host-to-host
//     product needs: A and B up, C down), both from the raw CUDA reference, at the same N;
//   - hybrid: bench hybrid with the cuBLAS kernel on one task and the fastest CPU kernel on
//     the other cores-1 (one thread each): dynamic balancing against the best static split
//     and against the GPU alone (share 1);
//   - procs: bench matmul with one process per core and one kernel thread each, against the
//     roofline (one process, one kernel call, all cores);
//   - cholesky: gpuCholeskyRows (the tiled Cholesky on the GPU and hybrid, against OpenBLAS
//     dpotrf on all cores and cuSOLVER's potrf).
//
// Rows are written as they come, so that a run cut short keeps what it measured,
// and a run of some sections (-sections) keeps the other sections' rows of -out's gpu.json;
// hybrid and matmul write their own tables into -out too. On a machine without a GPU it
// says why and measures nothing. A GPU machine needs no Go and no compiler: build the
// harness here with CGO_ENABLED=0 go build ./lab/bench and copy it there; it needs the
// NVIDIA driver, CUDA's libcudart, libcublas and libcusolver, and libopenblas.so.0.

func init() {
	register(command{
		name:    "gpu",
		summary: "SUMMA on cuBLAS against the device's bound, hybrid balancing, one process per core, Cholesky on the GPU",
		files:   tableFiles("gpu", "hybrid.txt", "hybrid.json", "matmul.txt", "matmul.json"),
		setup:   benchGPU,
	})
}

// gpuSectionOrder is the order of the sections, in a run and in docs/performance.md.
var gpuSectionOrder = map[string]int{"summa": 0, "hybrid": 1, "cholesky": 2, "procs": 3}

// gpuRow is one line of the gpu table: a measurement and its ratio to the row it is compared with.
type gpuRow struct {
	Figure  string  `json:"figure"` // summa, hybrid, procs or cholesky
	Impl    string  `json:"impl"`
	N       int     `json:"n"`
	Seconds float64 `json:"seconds"`
	GFlops  float64 `json:"gflops"`
	Ref     string  `json:"ref,omitempty"`   // Impl of the reference row
	Ratio   float64 `json:"ratio,omitempty"` // GFLOP/s over the reference's
	Note    string  `json:"note,omitempty"`
	Device  string  `json:"device"` // the GPU and the host's cores
	Date    string  `json:"date"`   // of the run, UTC
}

func benchGPU(fs *flag.FlagSet) func(rep *report) error {
	sections := fs.String("sections", "summa,hybrid,cholesky,procs", "sections to measure (always in that order)")
	summaN := fs.String("summa-n", "16384,32768", "SUMMA sizes N")
	summaNB := fs.String("summa-nb", "2048", "SUMMA block sizes NB (each N is run with each)")
	reps := fs.Int("reps", 3, "multiplications per SUMMA run; the fastest counts")
	hybridN := fs.Int("hybrid-n", 8192, "N of the hybrid runs")
	hybridReps := fs.Int("hybrid-reps", 10, "multiplications per hybrid job (the balancer's search takes about 5; the fastest counts)")
	shares := fs.String("hybrid-shares", "1,0.99,0.98,0.96,0.93", "static GPU shares the hybrid run tries")
	procsN := fs.Int("procs-n", 16384, "N of the one-process-per-core run")
	procsReps := fs.Int("procs-reps", 2, "multiplications per measurement of the one-process-per-core run and its roofline")
	cholN := fs.String("cholesky-n", "16384", "Cholesky sizes N")
	rounds := fs.Int("rounds", 2, "measurements of the reference and Cholesky rows; the best counts")
	return func(rep *report) error {
		g := gpuRun{reps: *reps, hybridN: *hybridN, hybridReps: *hybridReps, shares: *shares, procsN: *procsN, procsReps: *procsReps, rounds: *rounds}
		if err := g.validate(*sections, *summaN, *summaNB, *cholN); err != nil {
			return err
		}
		return g.run(rep)
	}
}

// gpuRun is one run of the gpu command: its flags, validated by validate.
type gpuRun struct {
	want                            map[string]bool // the sections to measure
	summaSizes, summaNBs, cholSizes []int
	reps, rounds                    int
	hybridN, hybridReps             int
	procsN, procsReps               int
	shares                          string // -hybrid-shares, as bench hybrid takes it
}

// validate checks the flags that g holds and fills the rest of g from the lists of
// -sections, -summa-n, -summa-nb and -cholesky-n.
func (g *gpuRun) validate(sections, summaN, summaNB, cholN string) error {
	g.want = map[string]bool{}
	for _, s := range splitList(sections) {
		if _, ok := gpuSectionOrder[s]; !ok {
			return badFlags("-sections: unknown section %q", s)
		}
		g.want[s] = true
	}
	var err error
	if g.summaSizes, err = intList(summaN); err != nil {
		return badFlags("-summa-n: %w", err)
	}
	if g.summaNBs, err = intList(summaNB); err != nil {
		return badFlags("-summa-nb: %w", err)
	}
	if g.cholSizes, err = intList(cholN); err != nil {
		return badFlags("-cholesky-n: %w", err)
	}
	if g.reps < 1 || g.rounds < 1 || g.hybridN < 1 || g.hybridReps < 2 || g.procsN < 1 || g.procsReps < 1 {
		return badFlags("-reps, -rounds, -hybrid-n, -procs-n and -procs-reps must be at least 1, -hybrid-reps at least 2")
	}
	return nil
}

// run measures the sections wanted on the GPU, or says why there is none usable.
func (g gpuRun) run(rep *report) error {
	if err := cublas.Load(); err != nil {
		return fmt.Errorf("gpu: no usable GPU here: %w", err)
	}
	card, err := cublas.DeviceName(0)
	if err != nil {
		return err
	}
	t := &gpuTable{rep: rep, device: fmt.Sprintf("%s, %d cores", card, runtime.NumCPU())}
	rep.header("%s", t.device)
	rep.line("%-9s %-18s %6s %9s %9s %-18s %7s  %s\n", "figure", "impl", "N", "seconds", "GFLOP/s", "ref", "ratio", "note")
	if err := t.keep(g.want); err != nil {
		return err
	}
	return g.sections(rep.out, t.emit)
}

// sections measures the sections wanted, in their order, each going on after another's
// failure; it returns their errors, joined.
func (g gpuRun) sections(out string, emit func(gpuRow)) error {
	cores := runtime.NumCPU()
	var errs []error
	section := func(name string, run func() error) {
		if !g.want[name] {
			return
		}
		fmt.Fprintf(os.Stderr, "gpu: %s\n", name)
		if err := run(); err != nil {
			fmt.Fprintf(os.Stderr, "gpu: %s: %v\n", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	section("summa", func() error { return gpuSumma(g.summaSizes, g.summaNBs, g.reps, g.rounds, emit) })
	section("hybrid", func() error { return gpuHybrid(out, g.hybridN, g.hybridReps, cores, g.shares, emit) })
	section("cholesky", func() error { return gpuCholesky(g.cholSizes, g.rounds, cores, emit) })
	section("procs", func() error { return gpuProcs(out, g.procsN, g.procsReps, cores, emit) })
	return errors.Join(errs...)
}

// gpuTable is the gpu table being written: its rows so far, on device.
type gpuTable struct {
	rep    *report
	device string // the GPU and the host's cores
	rows   []gpuRow
}

// keep takes the rows of -out's gpu.json whose sections are not measured now (not in
// want), so that a run of some sections replaces their rows and keeps the others'.
func (t *gpuTable) keep(want map[string]bool) error {
	path := filepath.Join(t.rep.out, "gpu.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil // nothing stored to keep
	}
	var old []gpuRow
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range old {
		if !want[r.Figure] {
			t.rows = append(t.rows, r)
			t.rep.line("%-9s %-18s %6d %9.4f %9.1f %-18s %7.3f  %s (kept from %s)\n", r.Figure, r.Impl, r.N, r.Seconds, r.GFlops, r.Ref, r.Ratio, r.Note, r.Date)
		}
	}
	return nil
}

// emit adds r, marked with the device and today's date, prints it and writes every row
// at once, so that a run cut short keeps it.
func (t *gpuTable) emit(r gpuRow) {
	r.Device, r.Date = t.device, time.Now().UTC().Format("2006-01-02")
	t.rows = append(t.rows, r)
	t.rep.row(r)
	t.rep.line("%-9s %-18s %6d %9.4f %9.1f %-18s %7.3f  %s\n", r.Figure, r.Impl, r.N, r.Seconds, r.GFlops, r.Ref, r.Ratio, r.Note)
	if err := t.rep.write(t.rows); err != nil {
		fmt.Fprintf(os.Stderr, "gpu: %v\n", err)
	}
}

// gpuCholesky emits gpuCholeskyRows at each of sizes, the rows of a size that failed
// included.
func gpuCholesky(sizes []int, rounds, cores int, emit func(gpuRow)) error {
	for _, n := range sizes {
		rows, err := gpuCholeskyRows(n, rounds, cores)
		for _, r := range rows {
			emit(r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gpuSumma measures the device's bound at each N, then the SUMMA at each NB.
func gpuSumma(sizes, nbs []int, reps, rounds int, emit func(gpuRow)) error {
	raw, err := newRawCUDA()
	if err != nil {
		return err
	}
	for _, n := range sizes {
		flops := summa.Flops(n)
		b, err := raw.alloc(n)
		if err != nil {
			return fmt.Errorf("the reference at N=%d: %w", n, err)
		}
		if _, err := raw.gemm(b, 1); err != nil { // cuBLAS's first call loads its kernels
			raw.release(b)
			return err
		}
		compute, err := bestOf(rounds, func() (float64, error) { d, err := raw.gemm(b, 1); return d.Seconds(), err })
		if err != nil {
			raw.release(b)
			return err
		}
		transfers, err := bestOf(rounds, func() (float64, error) { d, err := raw.transfer(b, 1); return d.Seconds(), err })
		raw.release(b)
		if err != nil {
			return err
		}
		bound := max(compute, transfers)
		emit(gpuRow{Figure: "summa", Impl: "cublas-compute", N: n, Seconds: compute, GFlops: flops / compute / 1e9, Note: "one cublasDgemm, device-resident"})
		emit(gpuRow{Figure: "summa", Impl: "pinned-transfers", N: n, Seconds: transfers, GFlops: flops / transfers / 1e9, Note: "A, B up and C down, pinned, cudaMemcpy"})
		emit(gpuRow{Figure: "summa", Impl: "bound", N: n, Seconds: bound, GFlops: flops / bound / 1e9, Note: "max of the two"})
		for _, nb := range nbs {
			res, err := runORWL(orwlJob{N: n, NB: nb, Grid: "1x1", Kernels: []string{cublas.Name}, Threads: 1, Reps: reps}, 1)
			if err != nil {
				return fmt.Errorf("the SUMMA at N=%d, NB=%d: %w", n, nb, err)
			}
			if !res.Verified {
				return fmt.Errorf("the SUMMA at N=%d, NB=%d: the product failed its check", n, nb)
			}
			emit(gpuRow{Figure: "summa", Impl: "orwl-summa", N: n, Seconds: res.Seconds, GFlops: flops / res.Seconds / 1e9, Ref: "bound",
				Ratio: bound / res.Seconds, Note: fmt.Sprintf("nb=%d, 1 task, host to host, %.2fx the bound's time; first multiplication %.3fs", nb, res.Seconds/bound, res.FirstSeconds)})
		}
	}
	return nil
}

// gpuHybrid runs bench hybrid with the GPU on one task and the fastest CPU kernel on the
// other cores-1, and reports its confirmation rows and the GPU alone.
func gpuHybrid(out string, n, reps, cores int, shares string, emit func(gpuRow)) error {
	cpu, err := fastestCPUKernel()
	if err != nil {
		return err
	}
	mix := cublas.Name + ":1," + cpu
	hy, err := selfRows[hybridRow](out, "hybrid", "-kernel", mix, "-tasks", strconv.Itoa(cores), "-n", strconv.Itoa(n),
		"-reps", strconv.Itoa(reps), "-rounds", "1", "-shares", shares)
	if err != nil {
		return err
	}
	flops := summa.Flops(n)
	var static, alone *hybridRow
	for i, r := range hy {
		switch {
		case r.Mode == "confirm-static":
			static = &hy[i]
		case r.Mode == "static" && r.Share == 1:
			alone = &hy[i]
		}
	}
	if static == nil || alone == nil {
		return fmt.Errorf("hybrid gave no confirmation or no GPU-alone row: %+v", hy)
	}
	for _, r := range hy {
		if r.Mode != "confirm-dynamic" {
			continue
		}
		emit(gpuRow{Figure: "hybrid", Impl: "dynamic", N: n, Seconds: r.Seconds, GFlops: r.GFlops, Ref: "best-static", Ratio: static.Seconds / r.Seconds,
			Note: fmt.Sprintf("%s, %d tasks; final GPU share %.4f; %.2fx the best static split's time, %.2fx the GPU alone's", mix, r.Tasks, r.Share, r.Seconds/static.Seconds, r.Seconds/alone.Seconds)})
	}
	emit(gpuRow{Figure: "hybrid", Impl: "best-static", N: n, Seconds: static.Seconds, GFlops: flops / static.Seconds / 1e9, Note: fmt.Sprintf("GPU share %.4f", static.Share)})
	emit(gpuRow{Figure: "hybrid", Impl: "gpu-alone", N: n, Seconds: alone.Seconds, GFlops: flops / alone.Seconds / 1e9, Note: "static share 1: the CPU tasks compute nothing"})
	return nil
}

// gpuProcs runs bench matmul with one process per core against the roofline.
func gpuProcs(out string, n, reps, cores int, emit func(gpuRow)) error {
	cpu, err := fastestCPUKernel()
	if err != nil {
		return err
	}
	mm, err := selfRows[mmResult](out, "matmul", "-n", strconv.Itoa(n), "-procs", strconv.Itoa(cores), "-kernel", cpu,
		"-reps", strconv.Itoa(reps), "-rounds", "1", "-shared=false", "-starpu=false", "-scalapack=false")
	if err != nil {
		return err
	}
	for _, r := range mm {
		row := gpuRow{Figure: "procs", Impl: r.Impl, N: r.N, Seconds: r.Seconds, GFlops: r.GFlops,
			Note: fmt.Sprintf("%s, %d process(es), grid %s, %d thread(s) each", r.Kernel, r.Procs, r.Grid, r.Threads)}
		if r.Impl != "roofline" {
			row.Ref, row.Ratio = "roofline", r.Roofline
		}
		emit(row)
	}
	return nil
}

// Markers of the GPU figures of docs/performance.md, which figures rewrites from the stored results of
// bench gpu (measured on another machine) rather than measuring them.
const (
	gpuFiguresBegin = "<!-- gpu-figures:begin -->"
	gpuFiguresEnd   = "<!-- gpu-figures:end -->"
)

// gpuFigures returns page with its GPU figures rewritten from dir/gpu.json (links is dir
// as the page links it); without that file they say that no GPU run is stored.
func gpuFigures(page []byte, dir, links string) ([]byte, error) {
	begin, end := bytes.Index(page, []byte(gpuFiguresBegin)), bytes.Index(page, []byte(gpuFiguresEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no %s ... %s section", gpuFiguresBegin, gpuFiguresEnd)
	}
	var b strings.Builder
	b.WriteString(gpuFiguresBegin + "\n")
	data, err := os.ReadFile(filepath.Join(dir, "gpu.json"))
	var rows []gpuRow
	switch {
	case errors.Is(err, os.ErrNotExist):
		b.WriteString("No GPU run is stored: `go run ./lab/bench gpu -out lab/results/gpu` on a machine with an NVIDIA GPU measures these figures.\n")
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &rows); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "gpu.json"), err)
		}
	}
	// The sections' order, whichever of them the last run measured and which it kept.
	slices.SortStableFunc(rows, func(a, b gpuRow) int { return gpuSectionOrder[a.Figure] - gpuSectionOrder[b.Figure] })
	if len(rows) > 0 {
		fmt.Fprintf(&b, "Measured by `go run ./lab/bench gpu` on %s, on %s (tables: [gpu](%s/gpu.txt), [hybrid](%s/hybrid.txt), [matmul](%s/matmul.txt)).\n"+
			"Ratios are GFLOP/s over the reference's, both measured in that run.\n\n", rows[0].Device, rows[0].Date, links, links, links)
		b.WriteString("| figure | measured | N | seconds | GFLOP/s | reference | ratio | note |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			if r.Ref == "" {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.4f | %.1f | %s | %.3f | %s |\n", r.Figure, r.Impl, r.N, r.Seconds, r.GFlops, r.Ref, r.Ratio, r.Note)
		}
		b.WriteString("\n| reference | N | seconds | GFLOP/s | what |\n|---|---|---|---|---|\n")
		for _, r := range rows {
			if r.Ref == "" {
				fmt.Fprintf(&b, "| %s: %s | %d | %.4f | %.1f | %s |\n", r.Figure, r.Impl, r.N, r.Seconds, r.GFlops, r.Note)
			}
		}
	}
	out := append([]byte{}, page[:begin]...)
	out = append(out, b.String()...)
	return append(out, page[end:]...), nil
}
