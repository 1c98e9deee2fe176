package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

// stencil: the time of one iteration of the ORWL Jacobi stencil (examples/stencil's engine,
// package jacobi) against the same stencil in C with MPI, per number of cells per task:
//
//   - orwl: one task per process, the processes started as one ORWL job on this machine;
//   - mpi-tcp and mpi-shm: lab/bench/stencil/stencil.c, built with Open MPI's mpicc (-cflags),
//     run with its mpirun over TCP (--mca btl tcp,self; -tcp=false leaves it out) and over
//     shared memory (vader, or sm on Open MPI 5), one rank per task (skipped, saying why,
//     without Open MPI).
//
// Layouts (-layouts): "line" is the 3-point stencil on a line cut in -procs blocks (one halo
// value each way); "PXxPY" is the 5-point stencil on a plane cut over a PX × PY grid of
// tasks, each block square (halo rows north and south, packed columns west and east). The
// default measures the line and the plane cut both ways over -procs tasks, so that both
// directions of the halo exchange are measured.
//
// Every contender computes the same iterations from the same initial values and prints the
// checksum of its result; a row counts only when every checksum equals the sequential
// sweep's, computed here. Contenders are run in interleaved rounds (-rounds); each row gives
// the best time per iteration of its rounds and the ratios orwl/MPI of the same run. The
// iterations of a size are chosen for about -time per run; the first tenth is not timed.
// With -loops (the default), the same sizes are also run as one task in one process, Go
// against C, which is the inner loop alone (ns per cell). The line sizes of -shared are also
// run as two jobs at once on the same cores (kind "shared"), ORWL and MPI over shared memory
// each against itself alone: the slower job's time per iteration over the time alone says
// what polling while waiting costs a job that shares its machine (twice the work on the same
// cores: about 2x when the jobs share the cores fairly).
//
// It prints the table (or with -json one JSON object per row), and writes stencil.txt and
// stencil.json into -out.

func init() {
	register(command{
		name:     "stencil",
		summary:  "ORWL Jacobi stencil (line and plane) against a C MPI halo exchange over TCP and shared memory",
		files:    tableFiles("stencil"),
		children: []child{jsonChild(stencilChildEnv, stencilChild)},
		setup:    benchStencil,
	})
}

//go:embed stencil/stencil.c
var stencilSource []byte

// stencilChildEnv marks a process of an orwl row; it holds the jacobi.Params in JSON.
const stencilChildEnv = "ORWL_BENCH_STENCIL_CHILD"

// stencilRun is what one run of any contender reports.
type stencilRun struct {
	PerIteration float64 `json:"per_iteration"` // seconds
	Checksum     string  `json:"checksum"`
}

// stencilRow is one row of the table: one layout and size, every contender.
type stencilRow struct {
	Kind         string             `json:"kind"`   // "halo": the job over several processes; "over": the same with more processes than cores; "shared": two jobs at once; "loop": one task, one process
	Layout       string             `json:"layout"` // "line" or "plane"
	Grid         string             `json:"grid"`   // tasks, PXxPY
	CellsPerTask int                `json:"cells_per_task"`
	Iters        int                `json:"iters"`
	Seconds      map[string]float64 `json:"seconds"` // best time per iteration, by contender
	Median       map[string]float64 `json:"median"`  // median time per iteration, by contender
	Ratio        map[string]float64 `json:"ratio"`   // orwl (or go) / contender
	Checked      bool               `json:"checked"` // every checksum equals the sequential sweep's
}

func benchStencil(fs *flag.FlagSet) func(rep *report) error {
	sizeList := fs.String("sizes", "1000,10000,100000,1000000,4000000", "comma-separated cells per task")
	procs := fs.Int("procs", 2, "processes (one task each) of the line, and of the default plane grids")
	layoutList := fs.String("layouts", "", `comma-separated "line" and plane grids "PXxPY" (default: line, procs x 1, 1 x procs)`)
	rounds := fs.Int("rounds", 3, "interleaved rounds; every contender's best is reported")
	perRun := fs.Duration("time", 500*time.Millisecond, "about how long one run iterates")
	cflags := fs.String("cflags", "-O2", "flags of mpicc for the C reference")
	loops := fs.Bool("loops", true, "also time one task in one process, Go against C (the inner loop)")
	withMPI := fs.Bool("mpi", true, "measure the C MPI reference when Open MPI's mpicc and mpirun are present")
	withTCP := fs.Bool("tcp", true, "with -mpi, also run the C MPI reference over TCP in the halo rows (false: shared memory only)")
	sharedList := fs.String("shared", "10000,100000", "comma-separated cells per task of the line rows that also run as two jobs at once (empty: none)")
	overList := fs.String("oversubscribed", "10000", "comma-separated cells per task of line rows over twice as many processes as cores (empty: none)")
	return func(rep *report) error {
		s := stencilBench{rounds: *rounds, perRun: *perRun, cflags: *cflags, loops: *loops, withMPI: *withMPI, withTCP: *withTCP}
		if err := s.validate(*sizeList, *layoutList, *sharedList, *overList, *procs); err != nil {
			return err
		}
		return s.run(rep)
	}
}

// stencilBench is one run of the stencil command: its flags, validated by validate.
type stencilBench struct {
	sizes        []int // cells per task
	layouts      []stencilLayout
	shared, over []int // cells per task of the shared and oversubscribed line rows
	rounds       int
	perRun       time.Duration
	cflags       string
	loops        bool // also the loop rows
	withMPI      bool
	withTCP      bool // also MPI over TCP in the halo rows
}

// validate checks the flags that s holds and fills the rest of s from the lists of
// -sizes, -layouts (over procs tasks), -shared and -oversubscribed.
func (s *stencilBench) validate(sizeList, layoutList, sharedList, overList string, procs int) error {
	var err error
	if s.sizes, err = intList(sizeList); err != nil {
		return badFlags("-sizes: %w", err)
	}
	if procs < 1 || s.rounds < 1 || s.perRun <= 0 {
		return badFlags("-procs and -rounds must be at least 1, -time positive")
	}
	if s.layouts, err = stencilLayouts(layoutList, procs); err != nil {
		return err
	}
	if s.shared, err = optionalIntList("shared", sharedList); err != nil {
		return err
	}
	s.over, err = optionalIntList("oversubscribed", overList)
	return err
}

// optionalIntList reads the list of -flag, which may be empty (no rows of that kind).
func optionalIntList(flag, list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	v, err := intList(list)
	if err != nil {
		return nil, badFlags("-%s: %w", flag, err)
	}
	return v, nil
}

// run builds the C reference (unless -mpi=false), measures every row and writes the table.
func (s stencilBench) run(rep *report) error {
	var mpi *openMPI
	var bin string
	if s.withMPI {
		var cleanup func()
		mpi, bin, cleanup = buildPeer("stencil", "the C MPI reference", "stencil", stencilSource, strings.Fields(s.cflags)...)
		defer cleanup()
	}
	rep.header("%s, %d cores; per iteration, best of %d interleaved rounds; C: mpicc %s",
		cpuModel(), runtime.NumCPU(), s.rounds, s.cflags)
	rep.line("%-5s %-6s %5s %10s %7s  %-56s  %s\n", "kind", "layout", "grid", "cells/task", "iters", "per iteration (best)", "ratios")
	var rows []stencilRow
	for _, j := range s.jobs() {
		row, err := measureStencil(j.kind, j.p, s.rounds, s.perRun, mpi, bin, s.withTCP)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		rep.row(row)
		rep.line("%-5s %-6s %5s %10d %7d  %-56s  %s\n", row.Kind, row.Layout, row.Grid, row.CellsPerTask, row.Iters,
			row.times(), row.ratios())
	}
	return rep.write(rows)
}

// stencilJob is one row to measure: its kind (stencilRow.Kind) and job.
type stencilJob struct {
	kind string
	p    jacobi.Params
}

// jobs returns the rows to measure, in the table's order: for each layout and size, the
// halo row, the loop row (with the first layout of each dimension) and the shared row
// (line sizes of -shared); then the oversubscribed rows.
func (s stencilBench) jobs() []stencilJob {
	loopOf := map[int]stencilLayout{}
	for _, lay := range slices.Backward(s.layouts) {
		loopOf[lay.Dim] = lay
	}
	var jobs []stencilJob
	for _, lay := range s.layouts {
		for _, size := range s.sizes {
			kinds := []string{"halo"}
			if s.loops && loopOf[lay.Dim] == lay {
				kinds = append(kinds, "loop")
			}
			if lay.Dim == 1 && slices.Contains(s.shared, size) {
				kinds = append(kinds, "shared")
			}
			for _, kind := range kinds {
				jobs = append(jobs, stencilJob{kind, lay.sized(size, kind == "loop")})
			}
		}
	}
	crowd := stencilLayout{Dim: 1, PX: 2 * runtime.NumCPU(), PY: 1}
	for _, size := range s.over {
		jobs = append(jobs, stencilJob{"over", crowd.sized(size, false)})
	}
	return jobs
}

// stencilLayout is a layout of the job: a line over PX tasks, or a plane over PX × PY.
type stencilLayout struct{ Dim, PX, PY int }

// stencilLayouts reads -layouts.
func stencilLayouts(list string, procs int) ([]stencilLayout, error) {
	if list == "" {
		list = fmt.Sprintf("line,%dx1,1x%d", procs, procs)
		if procs == 1 {
			list = "line,1x1"
		}
	}
	var out []stencilLayout
	for _, s := range splitList(list) {
		if s == "line" {
			out = append(out, stencilLayout{Dim: 1, PX: procs, PY: 1})
			continue
		}
		var l stencilLayout
		if n, err := fmt.Sscanf(s, "%dx%d", &l.PX, &l.PY); n != 2 || err != nil || l.PX < 1 || l.PY < 1 || fmt.Sprintf("%dx%d", l.PX, l.PY) != s {
			return nil, badFlags(`-layouts: %q is neither "line" nor a grid PXxPY`, s)
		}
		l.Dim = 2
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, badFlags("-layouts: empty")
	}
	return out, nil
}

// sized returns the job of layout l with about cells cells per task (square blocks on a
// plane), over one task when single.
func (l stencilLayout) sized(cells int, single bool) jacobi.Params {
	px, py := l.PX, l.PY
	if single {
		px, py = 1, 1
	}
	if l.Dim == 1 {
		return jacobi.Params{Dim: 1, NX: cells * px, NY: 1, PX: px, PY: 1}
	}
	side := max(1, int(math.Round(math.Sqrt(float64(cells)))))
	return jacobi.Params{Dim: 2, NX: side * px, NY: side * py, PX: px, PY: py}
}

// measureStencil runs the contenders of one row in interleaved rounds: orwl and MPI over
// shared memory and (with tcp) TCP for a halo row, Go and C in one process for a loop row.
func measureStencil(kind string, p jacobi.Params, rounds int, perRun time.Duration, mpi *openMPI, bin string, tcp bool) (stencilRow, error) {
	// About perRun per run: an iteration costs its cells, and a few microseconds for its
	// messages (a run of a few thousand iterations would time the start of the polling more
	// than its steady state).
	cells := p.NX * p.NY / p.Tasks()
	p.Iters = max(20, int(perRun.Seconds()/(float64(cells)*2e-9+3e-6)))
	if kind == "shared" {
		p.Iters *= 2 // two jobs started at once overlap for most of their runs
	}
	row := stencilRow{Kind: kind, Layout: "line", Grid: fmt.Sprintf("%dx%d", p.PX, p.PY), CellsPerTask: cells, Iters: p.Iters,
		Seconds: map[string]float64{}, Median: map[string]float64{}, Ratio: map[string]float64{}}
	if p.Dim == 2 {
		row.Layout = "plane"
	}
	cs := stencilContenders(kind, p, mpi, bin, tcp)
	times, err := row.measure(cs, rounds, fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p))))
	if err != nil {
		return row, err
	}
	row.summarize(cs, times)
	return row, nil
}

// stencilContender is one program of a row and how to run it once.
type stencilContender struct {
	name string
	run  func() (stencilRun, error)
}

// stencilContenders returns the contenders of a row of kind that runs p, the first one
// the row's reference (ORWL's or Go's); the MPI ones only with mpi (its program bin), MPI
// over TCP only with tcp.
func stencilContenders(kind string, p jacobi.Params, mpi *openMPI, bin string, tcp bool) []stencilContender {
	args := []string{strconv.Itoa(p.Dim), strconv.Itoa(p.NX), strconv.Itoa(p.NY), strconv.Itoa(p.PX), strconv.Itoa(p.PY), strconv.Itoa(p.Iters)}
	mpiRun := func(btl string) func() (stencilRun, error) {
		return func() (stencilRun, error) { return runMPIStencil(mpi, bin, btl, p.Tasks(), args) }
	}
	orwlRun := func() (stencilRun, error) {
		var r stencilRun
		return r, launchSelf(p.Tasks(), []string{"stencil"}, stencilChildEnv, p, &r)
	}
	var cs []stencilContender
	switch kind {
	case "halo":
		cs = append(cs, stencilContender{"orwl", orwlRun})
		if mpi != nil && tcp {
			cs = append(cs, stencilContender{"mpi-tcp", mpiRun("tcp")})
		}
		if mpi != nil {
			cs = append(cs, stencilContender{"mpi-shm", mpiRun(mpi.shm)})
		}
	case "over":
		cs = append(cs, stencilContender{"orwl", orwlRun})
		if mpi != nil {
			cs = append(cs, stencilContender{"mpi-shm", mpiRun(mpi.shm)})
		}
	case "shared":
		cs = append(cs, stencilContender{"orwl", orwlRun}, stencilContender{"orwl-x2", twoJobs(orwlRun)})
		if mpi != nil {
			cs = append(cs, stencilContender{"mpi-shm", mpiRun(mpi.shm)}, stencilContender{"mpi-shm-x2", twoJobs(mpiRun(mpi.shm))})
		}
	default:
		cs = append(cs, stencilContender{"go", func() (stencilRun, error) {
			r, err := runJacobi(p) // one process: it runs task 0
			if r == nil {
				return stencilRun{}, err
			}
			return *r, err
		}})
		if mpi != nil {
			cs = append(cs, stencilContender{"c", mpiRun(mpi.shm)})
		}
	}
	return cs
}

// measure runs cs in rounds interleaved rounds and returns each one's times per
// iteration, by name; it clears row.Checked when a checksum is not want.
func (row *stencilRow) measure(cs []stencilContender, rounds int, want string) (map[string][]float64, error) {
	times := map[string][]float64{}
	row.Checked = true
	for r := range rounds {
		for _, c := range cs {
			res, err := c.run()
			if err != nil {
				return nil, fmt.Errorf("%s %s %s, %d cells per task: %w", c.name, row.Layout, row.Grid, row.CellsPerTask, err)
			}
			if res.Checksum != want {
				fmt.Fprintf(os.Stderr, "stencil: %s %s %s %d cells per task: checksum %s, the sequential sweep's %s\n",
					c.name, row.Layout, row.Grid, row.CellsPerTask, res.Checksum, want)
				row.Checked = false
			}
			times[c.name] = append(times[c.name], res.PerIteration)
			fmt.Fprintf(os.Stderr, "stencil: %s %s %s %d cells per task, round %d: %s per iteration\n",
				c.name, row.Layout, row.Grid, row.CellsPerTask, r+1, seconds(res.PerIteration))
		}
	}
	return times, nil
}

// summarize fills the row's best and median times from times, and its ratios: each
// contender over itself alone in a shared row, else the first contender over each other.
func (row *stencilRow) summarize(cs []stencilContender, times map[string][]float64) {
	for name, ts := range times {
		slices.Sort(ts)
		row.Seconds[name], row.Median[name] = ts[0], ts[len(ts)/2]
	}
	for _, c := range cs[1:] {
		if alone, ok := strings.CutSuffix(c.name, "-x2"); ok && row.Kind == "shared" {
			row.Ratio[c.name+"/"+alone] = row.Seconds[c.name] / row.Seconds[alone]
		} else if row.Kind != "shared" {
			row.Ratio[cs[0].name+"/"+c.name] = row.Seconds[cs[0].name] / row.Seconds[c.name]
		}
	}
}

// twoJobs runs two jobs of run at once, on the same cores, and reports the slower one's time
// per iteration: what polling while waiting costs a job that shares its machine.
func twoJobs(run func() (stencilRun, error)) func() (stencilRun, error) {
	return func() (stencilRun, error) {
		var rs [2]stencilRun
		var errs [2]error
		var wg sync.WaitGroup
		for i := range rs {
			wg.Go(func() { rs[i], errs[i] = run() })
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return stencilRun{}, err
		}
		r := rs[0]
		r.PerIteration = max(rs[0].PerIteration, rs[1].PerIteration)
		if rs[1].Checksum != r.Checksum {
			r.Checksum = "differs between the two jobs"
		}
		return r, nil
	}
}

// runJacobi runs p through package jacobi and reports like the other contenders, in the
// process of task 0 (nil in the others).
func runJacobi(p jacobi.Params) (*stencilRun, error) {
	res, err := jacobi.Run(context.Background(), p)
	if err != nil || res == nil {
		return nil, err
	}
	return &stencilRun{PerIteration: res.PerIteration().Seconds(), Checksum: fmt.Sprintf("%016x", jacobi.Checksum(res.Cells))}, nil
}

// runMPIStencil runs the C reference with args over the BTL btl.
func runMPIStencil(mpi *openMPI, bin, btl string, procs int, args []string) (stencilRun, error) {
	var r stencilRun
	out, err := mpi.launch(procs, btl, nil, bin, args...)
	if err != nil {
		return r, err
	}
	v, err := field(out, "per-iteration")
	if err == nil {
		r.PerIteration, err = strconv.ParseFloat(v, 64)
	}
	if err == nil {
		r.Checksum, err = field(out, "checksum")
	}
	return r, err
}

// stencilChild is one process of an orwl row (its variable holds a jacobi.Params in JSON); the process of
// task 0 prints its stencilRun as JSON.
func stencilChild(p jacobi.Params) error {
	r, err := runJacobi(p)
	if r != nil {
		printJSON(r)
	}
	return err
}

// times formats the row's best times per iteration, by contender.
func (r stencilRow) times() string {
	var parts []string
	for _, name := range []string{"orwl", "orwl-x2", "mpi-tcp", "mpi-shm", "mpi-shm-x2", "go", "c"} {
		if s, ok := r.Seconds[name]; ok {
			parts = append(parts, name+" "+seconds(s))
		}
	}
	return strings.Join(parts, ", ")
}

// ratios formats the row's ratios, and a failed check.
func (r stencilRow) ratios() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(r.Ratio)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, r.Ratio[name]))
	}
	if !r.Checked {
		parts = append(parts, "CHECKSUMS DIFFER")
	}
	return strings.Join(parts, ", ")
}

// seconds formats a time in seconds with a unit that suits it.
func seconds(s float64) string { return nanos(s * 1e9) }
