package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
)

// sweep: examples/matmul's defaults (block size, grid, one task per process, kernel threads
// = cores / tasks) against the best setting a sweep of them finds, at the same N and
// process count, in one run: every block size of -nbs, both orientations of every grid of
// the tasks, and one or two tasks per process (the kernel threads shared between them). Each
// setting is the fastest of -reps multiplications, best of -rounds interleaved rounds. It
// prints every setting with its ratio to the best, and the default's, and writes the table
// to sweep.txt and sweep.json in -out.

func init() {
	register(command{
		name:     "sweep",
		summary:  "matmul's default setting against the best of a sweep of block sizes, grids and tasks per process",
		files:    tableFiles("sweep"),
		children: []child{jsonChild(matmulChildEnv, matmulChild)},
		setup:    benchSweep,
	})
}

// sweepRow is one setting of the sweep.
type sweepRow struct {
	N       int     `json:"n"`
	NB      int     `json:"nb"`
	Grid    string  `json:"grid"`
	Tasks   int     `json:"tasks"`
	Procs   int     `json:"procs"`
	Threads int     `json:"threads"`
	Default bool    `json:"default"`
	Seconds float64 `json:"seconds"`
	GFlops  float64 `json:"gflops"`
	VsBest  float64 `json:"vs_best"`
}

// sweepFlags are the flags of the sweep command.
type sweepFlags struct {
	sizes, nbs          string
	procs, reps, rounds int
}

// benchSweep declares the flags of the sweep command and returns its body.
func benchSweep(fs *flag.FlagSet) func(rep *report) error {
	f := &sweepFlags{}
	fs.StringVar(&f.sizes, "n", "4096,8192", "comma-separated matrix sizes N")
	fs.IntVar(&f.procs, "procs", runtime.NumCPU(), "processes (examples/matmul's default: one per core)")
	fs.StringVar(&f.nbs, "nbs", "256,512,1024,2048", "comma-separated block sizes")
	fs.IntVar(&f.reps, "reps", 2, "multiplications per measurement; seconds is the fastest of them")
	fs.IntVar(&f.rounds, "rounds", 2, "interleaved rounds; every setting's best is reported")
	return func(rep *report) error { return runSweep(f, rep) }
}

// runSweep measures the settings of every size of f, then writes the table.
func runSweep(f *sweepFlags, rep *report) error {
	ns, err := intList(f.sizes)
	if err != nil {
		return badFlags("-n: %w", err)
	}
	nbs, err := intList(f.nbs)
	if err != nil {
		return badFlags("-nbs: %w", err)
	}
	if f.procs < 1 || f.reps < 1 || f.rounds < 1 {
		return badFlags("-procs, -reps and -rounds must be at least 1")
	}
	kernel, err := fastestCPUKernel()
	if err != nil {
		return err
	}
	cores := runtime.NumCPU()
	var rows []sweepRow
	for _, n := range ns {
		settings := sweepSettings(n, f.procs, cores, nbs)
		if err := measureSweep(settings, kernel, f.reps, f.rounds); err != nil {
			return err
		}
		rows = append(rows, settings...)
	}
	rep.header("kernel %s, %d cores; fastest of %d multiplications, best of %d rounds",
		kernel, cores, f.reps, f.rounds)
	rep.line("%6s %5s %5s %5s %5s %7s %9s %9s %8s\n", "N", "NB", "grid", "tasks", "procs", "threads", "seconds", "GFLOP/s", "vs-best")
	for _, r := range rows {
		note := ""
		if r.Default {
			note = "  default"
		}
		rep.line("%6d %5d %5s %5d %5d %7d %9.3f %9.1f %8.3f%s\n", r.N, r.NB, r.Grid, r.Tasks, r.Procs, r.Threads, r.Seconds, r.GFlops, r.VsBest, note)
		rep.row(r)
	}
	return rep.write(rows)
}

// sweepSettings returns the settings of size n on procs processes of cores cores: first the
// default, what examples/matmul picks with no flag but -n, then every block size of nbs
// with every grid of one and of two tasks per process, each once.
func sweepSettings(n, procs, cores int, nbs []int) []sweepRow {
	def := sweepRow{N: n, Tasks: procs, Procs: procs, Threads: max(1, cores/procs), Default: true}
	g := grid.Square(def.Tasks)
	def.Grid, def.NB = g.String(), summa.DefaultNB(n, g)
	settings := []sweepRow{def}
	for _, tpp := range []int{1, 2} {
		tasks := procs * tpp
		for _, g := range grids(tasks) {
			for _, nb := range nbs {
				r := sweepRow{N: n, NB: nb, Grid: g.String(), Tasks: tasks, Procs: procs, Threads: max(1, cores/tasks)}
				if !slices.ContainsFunc(settings, func(s sweepRow) bool { return s.NB == r.NB && s.Grid == r.Grid && s.Tasks == r.Tasks }) {
					settings = append(settings, r)
				}
			}
		}
	}
	return settings
}

// measureSweep measures settings, all of one size, in rounds interleaved rounds, each the
// fastest of reps multiplications with kernel, keeping each setting's best, then fills in
// their GFLOP/s and ratio to the best.
func measureSweep(settings []sweepRow, kernel string, reps, rounds int) error {
	for round := range rounds {
		for i := range settings {
			r := &settings[i]
			res, err := runORWL(orwlJob{N: r.N, NB: r.NB, Grid: r.Grid, Kernels: slices.Repeat([]string{kernel}, r.Tasks),
				Threads: r.Threads, Reps: reps}, r.Procs)
			if err != nil {
				return err
			}
			if !res.Verified {
				return fmt.Errorf("matmul with N=%d NB=%d grid %s: the product did not verify", r.N, r.NB, r.Grid)
			}
			if r.Seconds == 0 || res.Seconds < r.Seconds {
				r.Seconds = res.Seconds
			}
			fmt.Fprintf(os.Stderr, "sweep: round %d, N=%d NB=%d grid %s, %d tasks in %d processes: %.3fs\n",
				round+1, r.N, r.NB, r.Grid, r.Tasks, r.Procs, res.Seconds)
		}
	}
	best := slices.MinFunc(settings, func(a, b sweepRow) int { return cmp.Compare(a.Seconds, b.Seconds) }).Seconds
	for i := range settings {
		settings[i].GFlops = summa.Flops(settings[i].N) / settings[i].Seconds / 1e9
		settings[i].VsBest = best / settings[i].Seconds
	}
	return nil
}

// grids returns every grid of tasks tasks: each factorisation P x Q, both ways.
func grids(tasks int) []grid.Grid {
	var gs []grid.Grid
	for p := 1; p <= tasks; p++ {
		if tasks%p == 0 {
			gs = append(gs, grid.Grid{P: p, Q: tasks / p})
		}
	}
	return gs
}
