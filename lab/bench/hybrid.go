package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
)

// hybrid: a job whose tasks use two kernels (examples/matmul -kernel cublas:1,openblas),
// balanced from measured rates while it runs, against the same job with static splits
// tried one after the other, in one run. A static split gives the first kernel's tasks
// the share s of C's columns (in equal parts) and the others 1-s; -shares lists the
// splits tried. The dynamic job starts from equal shares per task. Every job is measured
// -rounds times, interleaved, and keeps its best; seconds is the job's fastest
// multiplication (summa.Result.Seconds: for the dynamic job, one made with shares it
// found itself), mean the mean over its -reps multiplications (for the dynamic job, the
// first ones are made with equal and then corrected shares). The sweep (rows "dynamic"
// and "static", ratios to the best static split) is followed by a confirmation: the
// dynamic job and the best static split measured again, -rounds times interleaved (rows
// "confirm-dynamic" and "confirm-static", ratios to the latter), since the best of many
// noisy static rows is flattered by luck. The table goes to standard output (with -json,
// one JSON object per row) and, as hybrid.txt beside hybrid.json, into -out.

func init() {
	register(command{
		name:    "hybrid",
		summary: "dynamic load balancing of a mixed-kernel matmul against static splits",
		files:   tableFiles("hybrid"),
		setup:   benchHybrid,
	})
}

// hybridRow is one row of the hybrid table.
type hybridRow struct {
	Kernel      string  `json:"kernel"` // the mix
	N           int     `json:"n"`
	Tasks       int     `json:"tasks"`
	Mode        string  `json:"mode"`  // "dynamic", "static", "confirm-dynamic" or "confirm-static"
	Share       float64 `json:"share"` // the first kernel's share of C's columns (dynamic: found)
	Seconds     float64 `json:"seconds"`
	MeanSeconds float64 `json:"mean_seconds"`
	GFlops      float64 `json:"gflops"`
	VsBest      float64 `json:"vs_best_static"` // seconds / the best static split's seconds, in the same phase
	Verified    bool    `json:"verified"`
}

func benchHybrid(fs *flag.FlagSet) func(rep *report) error {
	spec := fs.String("kernel", "", "kernel mix, as examples/matmul takes it (default: a GPU kernel on one task and the fastest CPU kernel on the others; without a GPU, the fastest CPU kernel on one task and the slowest on the others)")
	n := fs.Int("n", 2048, "matrix size N")
	nb := fs.Int("nb", 512, "block size NB (of A's panels)")
	tasks := fs.Int("tasks", runtime.NumCPU(), "tasks, one per process")
	threads := fs.Int("threads", 1, "kernel threads per process (CPU kernels)")
	reps := fs.Int("reps", 6, "multiplications per job")
	rounds := fs.Int("rounds", 3, "measurements of every job; the best is kept")
	shareList := fs.String("shares", "1,0.98,0.96,0.94,0.92,0.9,0.85,0.8,0.7,0.6", "static shares of the first kernel's tasks")
	return func(rep *report) error {
		h := hybridRun{n: *n, nb: *nb, threads: *threads, reps: *reps, rounds: *rounds}
		if err := h.validate(*spec, *shareList, *tasks); err != nil {
			return err
		}
		return h.run(rep)
	}
}

// hybridRun is one run of the hybrid command: its flags, validated by validate.
type hybridRun struct {
	n, nb, threads, reps, rounds int
	mix                          []kernels.MixEntry // two kernels
	mixName                      string             // mix, formatted
	names                        []string           // the kernel of every task
	shares                       []float64          // the static shares tried
}

// validate checks the flags that h holds and fills the rest of h from spec (-kernel),
// shareList (-shares) and tasks (-tasks).
func (h *hybridRun) validate(spec, shareList string, tasks int) error {
	if h.n < 1 || h.nb < 1 || tasks < 2 || h.threads < 1 || h.reps < 2 || h.rounds < 1 {
		return errors.New("need -n, -nb, -threads, -rounds >= 1, -tasks >= 2 and -reps >= 2")
	}
	if spec == "" {
		var err error
		if spec, err = hybridDefaultMix(); err != nil {
			return err
		}
	}
	mix, err := kernels.ParseMix(spec, tasks)
	if err != nil {
		return err
	}
	if len(mix) != 2 {
		return badFlags("-kernel %q: want a mix of two kernels", spec)
	}
	for _, f := range strings.Split(shareList, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return badFlags("-shares: %q is not a share in [0, 1]", f)
		}
		h.shares = append(h.shares, v)
	}
	h.mix, h.mixName, h.names = mix, kernels.FormatMix(mix), kernels.TaskKernels(mix)
	return nil
}

// hybridDefaultMix is -kernel's default: the first available kernel (a GPU's) on one task
// and the fastest CPU kernel on the others; without a GPU, the fastest CPU kernel on one
// task and the slowest on the others.
func hybridDefaultMix() (string, error) {
	avail, cpu := kernels.Available(), kernels.AvailableOn(kernels.CPU)
	if len(cpu) == 0 {
		return "", errors.New("no CPU kernel is available")
	}
	rest := cpu[0] // with a GPU kernel first; else the slowest CPU kernel
	if rest == avail[0] {
		rest = cpu[len(cpu)-1]
	}
	if rest == avail[0] {
		return "", errors.New("the default mix needs two kernels; give -kernel")
	}
	return avail[0] + ":1," + rest, nil
}

// run measures the sweep and its confirmation, writes the table, and fails if a job did
// not verify.
func (h hybridRun) run(rep *report) error {
	jobs := h.jobs()
	fmt.Fprintf(os.Stderr, "hybrid: kernel %s, N %d, %d tasks in %d processes, %d multiplications per job, %d rounds\n",
		h.mixName, h.n, len(h.names), len(h.names), h.reps, h.rounds)
	sweep, sweepOK, err := h.measure("sweep", jobs)
	if err != nil {
		return err
	}
	bestStatic := 1 // sweep[0] is the dynamic job
	for i := 2; i < len(sweep); i++ {
		if sweep[i].Seconds < sweep[bestStatic].Seconds {
			bestStatic = i
		}
	}
	// The best of many static splits, each measured with noise, is flattered by its luck
	// (the least of many samples); measuring it again beside the dynamic job is fair.
	confirm, confirmOK, err := h.measure("confirm", []orwlJob{jobs[0], jobs[bestStatic]})
	if err != nil {
		return err
	}
	var rows []hybridRow
	for i, res := range sweep {
		mode := "static"
		if i == 0 {
			mode = "dynamic"
		}
		rows = append(rows, h.row(mode, res, sweepOK[i], sweep[bestStatic].Seconds))
	}
	rows = append(rows, h.row("confirm-dynamic", confirm[0], confirmOK[0], confirm[1].Seconds),
		h.row("confirm-static", confirm[1], confirmOK[1], confirm[1].Seconds))
	return h.write(rep, rows)
}

// jobs returns the dynamic job, then one job per static share.
func (h hybridRun) jobs() []orwlJob {
	job := orwlJob{N: h.n, NB: h.nb, Grid: grid.Grid{P: 1, Q: len(h.names)}.String(), Kernels: h.names, Threads: h.threads, Reps: h.reps}
	jobs := []orwlJob{job}
	jobs[0].Balance = true
	for _, s := range h.shares {
		j := job
		j.Split = h.weights(s)
		jobs = append(jobs, j)
	}
	return jobs
}

// weights gives the first kernel's tasks the share s, in equal parts, and the others 1-s.
func (h hybridRun) weights(s float64) []float64 {
	first := h.mix[0].Tasks
	w := make([]float64, len(h.names))
	for i := range w {
		if i < first {
			w[i] = s / float64(first)
		} else {
			w[i] = (1 - s) / float64(len(h.names)-first)
		}
	}
	return w
}

// measure runs jobs in interleaved rounds and returns the best result of each, and
// whether every run of it verified.
func (h hybridRun) measure(phase string, jobs []orwlJob) ([]orwlResult, []bool, error) {
	best, verified := make([]orwlResult, len(jobs)), make([]bool, len(jobs))
	for r := range h.rounds {
		for i, j := range jobs {
			res, err := runORWL(j, len(h.names))
			if err != nil {
				return nil, nil, err
			}
			fmt.Fprintf(os.Stderr, "hybrid: %s round %d job %d/%d: %.3fs\n", phase, r+1, i+1, len(jobs), res.Seconds)
			if r == 0 || res.Seconds < best[i].Seconds {
				best[i] = res
			}
			verified[i] = res.Verified && (r == 0 || verified[i])
		}
	}
	return best, verified, nil
}

// row is the row of a job's best result res, verified or not (ok), against the seconds ref
// of the best static split of its phase.
func (h hybridRun) row(mode string, res orwlResult, ok bool, ref float64) hybridRow {
	r := hybridRow{Kernel: h.mixName, N: h.n, Tasks: len(h.names), Mode: mode, Seconds: res.Seconds, MeanSeconds: res.MeanSeconds,
		GFlops: summa.Flops(h.n) / res.Seconds / 1e9, VsBest: res.Seconds / ref, Verified: ok}
	for t, f := range res.Split {
		if t < h.mix[0].Tasks {
			r.Share += f
		}
	}
	return r
}

// write prints and writes the table of rows, then fails if one did not verify.
func (h hybridRun) write(rep *report, rows []hybridRow) error {
	rep.header("kernel %s, N %d, NB %d, %d tasks in %d processes, %d kernel threads per process, %d cores, fastest of %d multiplications, best of %d rounds",
		h.mixName, h.n, h.nb, len(h.names), len(h.names), h.threads, runtime.NumCPU(), h.reps, h.rounds)
	rep.line("%-15s %14s %9s %9s %9s %15s %s\n", "mode", "share:"+h.mix[0].Name, "seconds", "mean", "GFLOP/s", "vs-best-static", "verified")
	for _, r := range rows {
		rep.line("%-15s %14.3f %9.3f %9.3f %9.1f %15.3f %v\n", r.Mode, r.Share, r.Seconds, r.MeanSeconds, r.GFlops, r.VsBest, r.Verified)
		rep.row(r)
	}
	if err := rep.write(rows); err != nil {
		return err
	}
	for _, r := range rows {
		if !r.Verified {
			return fmt.Errorf("a %s job (share %.3f) did not verify", r.Mode, r.Share)
		}
	}
	return nil
}
