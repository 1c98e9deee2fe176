package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/cholesky/tiled"
	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
)

// cholesky: the ORWL tiled Cholesky factorisation (examples/cholesky's engine, package
// tiled) against the peers a user would pick, at the same N, in one run:
//
//   - dpotrf: OpenBLAS's LAPACK dpotrf called once on the whole matrix from C through
//     LAPACKE, all cores as OpenBLAS threads (lab/bench/cholesky/potrf.c, built with gcc;
//     skipped without liblapacke-dev or OpenBLAS's headers): the denominator of every
//     double-precision ratio;
//   - orwl: one process per core, one task and one kernel thread each, the example's
//     defaults (grid, NB): how a job runs across processes and nodes; a tile of another
//     process of this host is read in place (shared memory), one of another host copied;
//   - orwl-1proc: one process with one task per core, one kernel thread each, the same
//     grid and NB: StarPU's configuration, the tasks sharing one address space;
//   - starpu: a double-precision tiled Cholesky on StarPU's task API, one CPU worker per
//     core, its codelets calling LAPACKE and CBLAS (OpenBLAS), tiles of the ORWL row's NB,
//     StarPU's prio scheduler (lab/bench/cholesky/starpu_dpotrf.c; skipped without
//     libstarpu-dev, or when NB does not divide N);
//   - scalapack: PDPOTRF of Debian's libscalapack-openmpi, one process per core, the best
//     of block sizes 128 and 256 and of the grids of that many processes
//     (lab/bench/cholesky/pdpotrf.c, built with Open MPI's mpicc; skipped without);
//   - spotrf and starpu-implicit, in single precision, compared with each other only:
//     OpenBLAS's spotrf from the same C program, and the cholesky_implicit example Debian
//     ships with StarPU (starpu-examples), which computes in single precision.
//
// Every implementation factors a fresh matrix -reps times per measurement; a row reports
// the fastest factorisation and the first one (first_gflops: the first of a measurement's
// process, which pays for its warm-up), each the best over -rounds measurements made in
// turn, so that all rows see the same machine. Every row checks its factor (the scaled
// residual of tiled.Result, below 30; StarPU's example with its own -check). GFLOP =
// N³/3. It prints the table and writes it to cholesky.txt, with cholesky.json, into -out.

func init() {
	register(command{
		name:     "cholesky",
		summary:  "ORWL tiled Cholesky against OpenBLAS dpotrf, StarPU (double) and ScaLAPACK PDPOTRF",
		files:    tableFiles("cholesky"),
		children: []child{jsonChild(choleskyChildEnv, choleskyChild)},
		setup:    benchCholesky,
	})
}

var (
	//go:embed cholesky/potrf.c
	potrfSource []byte
	//go:embed cholesky/starpu_dpotrf.c
	starpuPotrfSource []byte
	//go:embed cholesky/pdpotrf.c
	pdpotrfSource []byte
)

// choleskyChildEnv marks a process of an orwl row; it holds the row's parameters.
const choleskyChildEnv = "ORWL_BENCH_CHOLESKY_CHILD"

// cholRow is one row of the cholesky table.
type cholRow struct {
	Impl        string  `json:"impl"`
	Precision   string  `json:"precision"`
	N           int     `json:"n"`
	NB          int     `json:"nb"`
	Procs       int     `json:"procs"` // processes, or StarPU workers
	Threads     int     `json:"threads"`
	Grid        string  `json:"grid"`
	Seconds     float64 `json:"seconds"`
	First       float64 `json:"first_seconds"`
	GFlops      float64 `json:"gflops"`
	FirstGFlops float64 `json:"first_gflops"`
	Ratio       float64 `json:"vs_reference"`       // GFLOP/s over dpotrf's (spotrf's in single precision)
	FirstRatio  float64 `json:"first_vs_reference"` // the same for the first factorisations
	Residual    float64 `json:"residual"`
	Note        string  `json:"note,omitempty"`
}

// cholPeer is one implementation of the table: it measures one row.
type cholPeer struct {
	impl, precision string
	measure         func(n int) (cholRow, error)
}

func benchCholesky(fs *flag.FlagSet) func(rep *report) error {
	sizes := fs.String("n", "4096,8192", "comma-separated matrix orders N")
	procs := fs.Int("procs", runtime.NumCPU(), "processes (ORWL, ScaLAPACK), workers (StarPU) and threads (dpotrf)")
	nb := fs.Int("nb", 0, "tile size of orwl and starpu (0: examples/cholesky's default for the N)")
	reps := fs.Int("reps", 3, "factorisations per measurement; a row gives the fastest and the first")
	rounds := fs.Int("rounds", 2, "measurements of every row, made in turn; the best is reported (the machine may be shared)")
	single := fs.Bool("single", true, "add the single-precision rows (spotrf, StarPU's cholesky_implicit)")
	impls := fs.String("impl", strings.Join(cholImpls, ","), "comma-separated implementations to measure, of "+strings.Join(cholImpls, ", "))
	return func(rep *report) error {
		ns, err := intList(*sizes)
		if err != nil {
			return badFlags("-n: %w", err)
		}
		if *nb < 0 || *reps < 1 || *rounds < 1 || *procs < 1 {
			return badFlags("-nb must not be negative, -procs, -reps and -rounds must be at least 1")
		}
		want, err := cholWanted(*impls)
		if err != nil {
			return badFlags("-impl: %w", err)
		}
		name, err := fastestCPUKernel()
		if err != nil {
			return err
		}
		if _, err := kernels.GetCholesky(name); err != nil { // loads OpenBLAS: OPENBLAS_CORETYPE is set for the C peers
			return err
		}
		dir, err := os.MkdirTemp("", "orwl-bench-cholesky")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		b := &cholBench{procs: *procs, nb: *nb, reps: *reps, kernel: name}
		peers, cleanup := b.peers(dir, func(impl string) bool { return want[impl] && (*single || !slices.Contains(cholSingle, impl)) })
		defer cleanup()
		fmt.Fprintf(os.Stderr, "cholesky: kernel %s, %d processes, %d factorisations per measurement, best of %d rounds, OPENBLAS_CORETYPE=%s\n",
			name, *procs, *reps, *rounds, os.Getenv("OPENBLAS_CORETYPE"))
		rep.header("kernel %s, %d cores, fastest and first of %d factorisations, best of %d rounds in turn, OPENBLAS_CORETYPE=%s",
			name, runtime.NumCPU(), *reps, *rounds, os.Getenv("OPENBLAS_CORETYPE"))
		rep.line("%6s  %-16s %-6s %5s %7s %5s %5s %8s %8s %11s %9s %6s  %s\n", "N", "impl", "prec", "procs", "threads", "grid", "NB",
			"seconds", "GFLOP/s", "first GF/s", "vs-ref", "first", "note")
		var rows []cholRow
		for _, n := range ns {
			got := measureInTurn(peers, n, *rounds)
			finishRatios(got)
			for _, r := range got {
				rows = append(rows, r)
				rep.row(r)
				rep.line("%6d  %-16s %-6s %5d %7d %5s %5d %8.3f %8.1f %11.1f %9.3f %6.3f  %s\n", r.N, r.Impl, r.Precision, r.Procs, r.Threads, r.Grid, r.NB,
					r.Seconds, r.GFlops, r.FirstGFlops, r.Ratio, r.FirstRatio, r.Note)
			}
		}
		return rep.write(rows)
	}
}

// measureInTurn measures every peer rounds times at order n, one after the other in each
// round, and keeps each peer's best (fastest, and fastest first factorisation). A peer that
// fails is reported on standard error and left out.
func measureInTurn(peers []cholPeer, n, rounds int) []cholRow {
	best := make([]*cholRow, len(peers))
	for range rounds {
		for x, p := range peers {
			r, err := p.measure(n)
			if err != nil {
				fmt.Fprintf(os.Stderr, "cholesky: %s N=%d: %v\n", p.impl, n, err)
				continue
			}
			r.Impl, r.Precision, r.N = p.impl, p.precision, n
			r.GFlops, r.FirstGFlops = tiled.Flops(n)/r.Seconds/1e9, tiled.Flops(n)/r.First/1e9
			if b := best[x]; b == nil {
				best[x] = &r
			} else {
				first := min(b.First, r.First)
				if r.Seconds < b.Seconds {
					*b = r
				}
				b.First, b.FirstGFlops = first, tiled.Flops(n)/first/1e9
			}
		}
	}
	var rows []cholRow
	for _, b := range best {
		if b != nil {
			rows = append(rows, *b)
		}
	}
	return rows
}

// finishRatios sets every row's ratios to the reference of its precision in rows (dpotrf,
// spotrf).
func finishRatios(rows []cholRow) {
	ref := map[string]cholRow{}
	for _, r := range rows {
		if r.Impl == "dpotrf" || r.Impl == "spotrf" {
			ref[r.Precision] = r
		}
	}
	for x := range rows {
		if d, ok := ref[rows[x].Precision]; ok {
			rows[x].Ratio, rows[x].FirstRatio = rows[x].GFlops/d.GFlops, rows[x].FirstGFlops/d.FirstGFlops
		}
	}
}

// cholImpls are the implementations of the table, in the order they are measured in a
// round.
var cholImpls = []string{"dpotrf", "orwl", "orwl-1proc", "starpu", "scalapack", "spotrf", "starpu-implicit"}

// cholSingle are the implementations of cholImpls in single precision: -single=false leaves
// them out.
var cholSingle = []string{"spotrf", "starpu-implicit"}

// cholWanted parses -impl: a non-empty comma-separated list of names of cholImpls.
func cholWanted(list string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, name := range splitList(list) {
		if !slices.Contains(cholImpls, name) {
			return nil, fmt.Errorf("%q is not one of %s", name, strings.Join(cholImpls, ", "))
		}
		want[name] = true
	}
	if len(want) == 0 {
		return nil, errors.New("no implementation named")
	}
	return want, nil
}

// cholBench holds what the peers of one run share.
type cholBench struct {
	procs, nb, reps int
	kernel          string
}

// peers builds the C peers of the implementations want accepts (names of cholImpls) into
// dir and returns them in the order of cholImpls, saying on standard error which are
// skipped and why; cleanup removes what it built elsewhere.
func (b *cholBench) peers(dir string, want func(impl string) bool) (peers []cholPeer, cleanup func()) {
	skip := func(what string, err error) { fmt.Fprintf(os.Stderr, "cholesky: skipping %s: %v\n", what, err) }
	add := func(impl, precision string, measure func(n int) (cholRow, error)) {
		if want(impl) {
			peers = append(peers, cholPeer{impl, precision, measure})
		}
	}
	potrf := ""
	if want("dpotrf") || want("spotrf") {
		var err error
		if potrf, err = buildC(dir, "potrf", potrfSource, "-llapacke", "-lopenblas", "-lm"); err != nil {
			skip("dpotrf and spotrf (they need gcc, liblapacke-dev and libopenblas-dev)", err)
		} else {
			add("dpotrf", "double", func(n int) (cholRow, error) { return b.timePotrf(potrf, n, "d") })
		}
	}
	add("orwl", "double", func(n int) (cholRow, error) { return b.timeORWL(n, b.procs) })
	add("orwl-1proc", "double", func(n int) (cholRow, error) { return b.timeORWL(n, 1) })
	if want("starpu") {
		if starpu, err := buildC(dir, "starpu_dpotrf", starpuPotrfSource, starpuFlags("-llapacke", "-lopenblas", "-lm")...); err != nil {
			skip("starpu (it needs libstarpu-dev, liblapacke-dev and libopenblas-dev)", err)
		} else {
			add("starpu", "double", func(n int) (cholRow, error) { return b.timeStarpu(starpu, n) })
		}
	}
	cleanup = func() {}
	if want("scalapack") {
		var mpi *openMPI
		var pdpotrf string
		mpi, pdpotrf, cleanup = buildPeer("cholesky", "scalapack (it needs libscalapack-openmpi-dev)", "pdpotrf", pdpotrfSource, "-O2", "-lscalapack-openmpi", "-lm")
		if pdpotrf != "" {
			add("scalapack", "double", func(n int) (cholRow, error) { return b.timeScalapack(mpi, pdpotrf, n) })
		}
	}
	if potrf != "" {
		add("spotrf", "single", func(n int) (cholRow, error) { return b.timePotrf(potrf, n, "s") })
	}
	if want("starpu-implicit") {
		if implicit, err := findStarpuExample("cholesky_implicit"); err != nil {
			skip("starpu-implicit", err)
		} else {
			add("starpu-implicit", "single", func(n int) (cholRow, error) { return b.timeStarpuImplicit(implicit, n) })
		}
	}
	return peers, cleanup
}

// buildC compiles the C program name from src with gcc into dir, with flags after the
// source.
func buildC(dir, name string, src []byte, flags ...string) (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", errors.New("gcc not found")
	}
	file := filepath.Join(dir, name+".c")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-O2", "-o", bin, file}, flags...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v: %s", strings.Join(args, " "), err, firstLine(out))
	}
	return bin, nil
}

// starpuFlags returns StarPU's compiler and linker flags (pkg-config), then extra.
func starpuFlags(extra ...string) []string {
	out, err := exec.Command("pkg-config", "--cflags", "--libs", "starpu-1.3").Output()
	if err != nil {
		return append([]string{"-lstarpu-1.3"}, extra...)
	}
	return append(strings.Fields(string(out)), extra...)
}

// findStarpuExample finds one of the examples of Debian's starpu-examples.
func findStarpuExample(name string) (string, error) {
	for _, pattern := range []string{"/usr/lib/*/starpu/examples/" + name, "/usr/lib/starpu/examples/" + name, "/usr/local/lib/starpu/examples/" + name} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("StarPU's %s example not found (install Debian package starpu-examples)", name)
}

// runRef runs a C reference with env added and reads its "first=F seconds=S residual=R
// verified=V" line.
func runRef(env []string, bin string, args ...string) (cholRow, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return cholRow{}, fmt.Errorf("%s %s: %v: %s%s", bin, strings.Join(args, " "), err, out, stderr.String())
	}
	return parseRefLine(string(out))
}

// parseRefLine reads the fields of a C reference's result line; it fails unless verified.
func parseRefLine(out string) (cholRow, error) {
	var r cholRow
	if v, err := field(out, "verified"); err != nil || v != "true" {
		return r, fmt.Errorf("the factor did not verify: %s", strings.TrimSpace(out))
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"first", &r.First}, {"seconds", &r.Seconds}, {"residual", &r.Residual}} {
		v, err := field(out, f.name)
		if err != nil {
			return r, err
		}
		if *f.to, err = strconv.ParseFloat(v, 64); err != nil {
			return r, fmt.Errorf("%s=%q: %w", f.name, v, err)
		}
	}
	if !(r.Seconds > 0 && r.First > 0) {
		return r, fmt.Errorf("no time in %q", strings.TrimSpace(out))
	}
	return r, nil
}

// openblasEnv is the environment of a C peer calling OpenBLAS with threads threads.
func openblasEnv(threads int) []string {
	return []string{"OPENBLAS_NUM_THREADS=" + strconv.Itoa(threads), "OPENBLAS_CORETYPE=" + os.Getenv("OPENBLAS_CORETYPE")}
}

// timePotrf times dpotrf (precision "d") or spotrf ("s") with every core as a thread.
func (b *cholBench) timePotrf(bin string, n int, precision string) (cholRow, error) {
	r, err := runRef(openblasEnv(b.procs), bin, strconv.Itoa(n), strconv.Itoa(b.reps), precision)
	r.Procs, r.Threads, r.Grid, r.NB, r.Note = 1, b.procs, "-", n, "one LAPACKE call, all threads"
	return r, err
}

// tileSize is the NB of the orwl and starpu rows at order n.
func (b *cholBench) tileSize(n int) int {
	if b.nb > 0 {
		return b.nb
	}
	return tiled.DefaultNB(n)
}

// timeStarpu times the double-precision StarPU program with one worker per core.
func (b *cholBench) timeStarpu(bin string, n int) (cholRow, error) {
	nb := b.tileSize(n)
	if n%nb != 0 {
		return cholRow{}, fmt.Errorf("NB %d does not divide N %d", nb, n)
	}
	home, err := os.MkdirTemp("", "orwl-bench-starpu")
	if err != nil {
		return cholRow{}, err
	}
	defer os.RemoveAll(home)
	env := append(openblasEnv(1), "STARPU_SILENT=1", "STARPU_HOME="+home, "STARPU_NCPU="+strconv.Itoa(b.procs),
		"STARPU_NCUDA=0", "STARPU_NOPENCL=0", "STARPU_SCHED=prio")
	r, err := runRef(env, bin, strconv.Itoa(n), strconv.Itoa(nb), strconv.Itoa(b.reps))
	r.Procs, r.Threads, r.Grid, r.NB, r.Note = b.procs, 1, "-", nb, "workers, prio scheduler"
	return r, err
}

// timeStarpuImplicit times Debian's single-precision cholesky_implicit example, one
// process of one worker per core, blocks of the orwl row's NB: its -check compares L·Lᵀ
// with A. Each run gives one factorisation (first and fastest alike).
func (b *cholBench) timeStarpuImplicit(bin string, n int) (cholRow, error) {
	nb := b.tileSize(n)
	home, err := os.MkdirTemp("", "orwl-bench-starpu")
	if err != nil {
		return cholRow{}, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(bin, "-size", strconv.Itoa(n), "-nblocks", strconv.Itoa(max(1, n/nb)), "-check")
	cmd.Env = append(os.Environ(), append(openblasEnv(1), "STARPU_SILENT=1", "STARPU_HOME="+home,
		"STARPU_NCPU="+strconv.Itoa(b.procs), "STARPU_NCUDA=0", "STARPU_NOPENCL=0")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return cholRow{}, fmt.Errorf("%s: %v: %s", bin, err, strings.TrimSpace(string(out)))
	}
	// The last line: size ms GFlop/s.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	ms, err := strconv.ParseFloat(f[min(1, len(f)-1)], 64)
	if len(f) < 3 || err != nil || ms <= 0 {
		return cholRow{}, fmt.Errorf("%s: no timing in %q", bin, out)
	}
	return cholRow{Seconds: ms / 1e3, First: ms / 1e3, Procs: b.procs, Threads: 1, Grid: "-", NB: n / max(1, n/nb),
		Note: "Debian's example, single precision, checked by -check"}, nil
}

// timeScalapack times PDPOTRF on the best of block sizes 128 and 256 and the grids of
// b.procs processes.
func (b *cholBench) timeScalapack(mpi *openMPI, bin string, n int) (cholRow, error) {
	var best cholRow
	first := math.Inf(1)
	g := grid.Square(b.procs)
	for _, gr := range slices.Compact([]grid.Grid{g, g.Transpose()}) {
		for _, nb := range []int{128, 256} {
			out, err := mpi.launch(b.procs, mpi.shm, openblasEnv(1), bin,
				strconv.Itoa(n), strconv.Itoa(nb), strconv.Itoa(gr.P), strconv.Itoa(gr.Q), strconv.Itoa(b.reps))
			if err != nil {
				return best, err
			}
			r, err := parseRefLine(out)
			if err != nil {
				return best, err
			}
			if best.Seconds == 0 || r.Seconds < best.Seconds {
				best, best.NB, best.Grid = r, nb, gr.String()
			}
			first = min(first, r.First)
		}
	}
	best.First, best.Procs, best.Threads, best.Note = first, b.procs, 1, "best of NB 128, 256 and the grids"
	return best, nil
}

// cholJob is one ORWL row's job, passed to its processes as JSON in choleskyChildEnv.
type cholJob struct {
	N, NB, Reps int
	Grid        string
	Kernel      string
}

// cholResult is what the process of task 0 prints, as one JSON line. Release is the time
// a task spends releasing tiles (handing them on, the copies to other processes
// included), per factorisation and task.
type cholResult struct {
	Seconds, First, Residual, Release float64
	Verified                          bool
}

// timeORWL runs an ORWL row: one task per core, one kernel thread each, in procs
// processes (b.procs: a task per process; 1: all in one, as StarPU's workers). A row's
// Procs and Threads are its processes and the kernel threads of each.
func (b *cholBench) timeORWL(n, procs int) (cholRow, error) {
	grid := tiled.DefaultGrid(b.procs)
	job := cholJob{N: n, NB: b.tileSize(n), Reps: b.reps, Grid: grid.String(), Kernel: b.kernel}
	var res cholResult
	if err := launchSelf(procs, []string{"cholesky"}, choleskyChildEnv, job, &res); err != nil {
		return cholRow{}, err
	}
	if !res.Verified {
		return cholRow{}, fmt.Errorf("the factor did not verify (residual %g)", res.Residual)
	}
	note := "tasks = processes"
	if procs == 1 && b.procs > 1 {
		note = fmt.Sprintf("%d tasks in one process, tiles read in place", b.procs)
	}
	note += fmt.Sprintf(", %s, releases %.1f%%", b.kernel, 100*res.Release/res.Seconds)
	return cholRow{Seconds: res.Seconds, First: res.First, Residual: res.Residual, Procs: procs, Threads: b.procs / procs,
		Grid: job.Grid, NB: job.NB, Note: note}, nil
}

// choleskyChild is one process of an ORWL row (its variable holds a cholJob in JSON): it runs its part
// with one kernel thread and, in the process of task 0, prints the result as JSON.
func choleskyChild(job cholJob) error {
	g, err := grid.Parse(job.Grid, summa.MaxTasks)
	if err != nil {
		return err
	}
	names := slices.Repeat([]string{job.Kernel}, g.Tasks())
	if err := kernels.SetCPUThreads(names, 1); err != nil {
		return err
	}
	res, err := tiled.Run(context.Background(), tiled.Params{N: job.N, NB: job.NB, Grid: g, Kernels: names, Reps: job.Reps, Seed: 1})
	if err != nil || res == nil {
		return err
	}
	var release time.Duration
	for _, s := range res.Tasks {
		release += s.Release
	}
	release /= time.Duration(len(res.Tasks) * job.Reps)
	b, _ := json.Marshal(cholResult{Seconds: res.Seconds, First: res.FirstSeconds, Residual: res.Residual, Release: release.Seconds(), Verified: res.Verified})
	fmt.Println(string(b))
	return nil
}
