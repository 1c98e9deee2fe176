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
	cores := runtime.NumCPU()
	spec := fs.String("kernel", "", "kernel mix, as examples/matmul takes it (default: a GPU kernel on one task and the fastest CPU kernel on the others; without a GPU, the fastest CPU kernel on one task and the slowest on the others)")
	n := fs.Int("n", 2048, "matrix size N")
	nb := fs.Int("nb", 512, "block size NB (of A's panels)")
	tasks := fs.Int("tasks", cores, "tasks, one per process")
	threads := fs.Int("threads", 1, "kernel threads per process (CPU kernels)")
	reps := fs.Int("reps", 6, "multiplications per job")
	rounds := fs.Int("rounds", 3, "measurements of every job; the best is kept")
	shareList := fs.String("shares", "1,0.98,0.96,0.94,0.92,0.9,0.85,0.8,0.7,0.6", "static shares of the first kernel's tasks")
	return func(rep *report) error {
		if *n < 1 || *nb < 1 || *tasks < 2 || *threads < 1 || *reps < 2 || *rounds < 1 {
			return errors.New("need -n, -nb, -threads, -rounds >= 1, -tasks >= 2 and -reps >= 2")
		}
		if *spec == "" {
			avail, cpu := kernels.Available(), kernels.AvailableOn(kernels.CPU)
			if len(cpu) == 0 {
				return errors.New("no CPU kernel is available")
			}
			rest := cpu[0] // with a GPU kernel first; else the slowest CPU kernel
			if rest == avail[0] {
				rest = cpu[len(cpu)-1]
			}
			if rest == avail[0] {
				return errors.New("the default mix needs two kernels; give -kernel")
			}
			*spec = avail[0] + ":1," + rest
		}
		mix, err := kernels.ParseMix(*spec, *tasks)
		if err != nil {
			return err
		}
		if len(mix) != 2 {
			return badFlags("-kernel %q: want a mix of two kernels", *spec)
		}
		var shares []float64
		for _, f := range strings.Split(*shareList, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v >= 0 && v <= 1) {
				return badFlags("-shares: %q is not a share in [0, 1]", f)
			}
			shares = append(shares, v)
		}
		names := kernels.TaskKernels(mix)
		first := mix[0].Tasks
		// weights gives the first kernel's tasks the share s, in equal parts.
		weights := func(s float64) []float64 {
			w := make([]float64, len(names))
			for i := range w {
				if i < first {
					w[i] = s / float64(first)
				} else {
					w[i] = (1 - s) / float64(len(names)-first)
				}
			}
			return w
		}
		job := orwlJob{N: *n, NB: *nb, Grid: grid.Grid{P: 1, Q: len(names)}.String(), Kernels: names, Threads: *threads, Reps: *reps}
		jobs := []orwlJob{job}
		jobs[0].Balance = true
		for _, s := range shares {
			j := job
			j.Split = weights(s)
			jobs = append(jobs, j)
		}
		mixName := kernels.FormatMix(mix)
		fmt.Fprintf(os.Stderr, "hybrid: kernel %s, N %d, %d tasks in %d processes, %d multiplications per job, %d rounds\n",
			mixName, *n, len(names), len(names), *reps, *rounds)
		// measure runs jobs in interleaved rounds and returns the best result of each, and
		// whether every run of it verified.
		measure := func(phase string, jobs []orwlJob) ([]orwlResult, []bool, error) {
			best, verified := make([]orwlResult, len(jobs)), make([]bool, len(jobs))
			for r := range *rounds {
				for i, j := range jobs {
					res, err := runORWL(j, len(names))
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
		sweep, sweepOK, err := measure("sweep", jobs)
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
		confirm, confirmOK, err := measure("confirm", []orwlJob{jobs[0], jobs[bestStatic]})
		if err != nil {
			return err
		}
		row := func(mode string, res orwlResult, ok bool, ref float64) hybridRow {
			r := hybridRow{Kernel: mixName, N: *n, Tasks: len(names), Mode: mode, Seconds: res.Seconds, MeanSeconds: res.MeanSeconds,
				GFlops: summa.Flops(*n) / res.Seconds / 1e9, VsBest: res.Seconds / ref, Verified: ok}
			for t, f := range res.Split {
				if t < first {
					r.Share += f
				}
			}
			return r
		}
		var rows []hybridRow
		for i, res := range sweep {
			mode := "static"
			if i == 0 {
				mode = "dynamic"
			}
			rows = append(rows, row(mode, res, sweepOK[i], sweep[bestStatic].Seconds))
		}
		rows = append(rows, row("confirm-dynamic", confirm[0], confirmOK[0], confirm[1].Seconds),
			row("confirm-static", confirm[1], confirmOK[1], confirm[1].Seconds))

		rep.header("kernel %s, N %d, NB %d, %d tasks in %d processes, %d kernel threads per process, %d cores, fastest of %d multiplications, best of %d rounds",
			mixName, *n, *nb, len(names), len(names), *threads, cores, *reps, *rounds)
		rep.line("%-15s %14s %9s %9s %9s %15s %s\n", "mode", "share:"+mix[0].Name, "seconds", "mean", "GFLOP/s", "vs-best-static", "verified")
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
}
