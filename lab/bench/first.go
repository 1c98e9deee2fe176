package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
)

// first: the first multiplication of examples/matmul with its defaults (one process per
// core, a task each, the most square grid, NB from summa.DefaultNB, kernel threads = cores
// / processes, the fastest CPU kernel) against C OpenBLAS's first cblas_dgemm call, as a
// program that multiplies once sees them. Both run in fresh processes and are timed from
// the moment A and B exist: for C, the allocation of C, the call, OpenBLAS's thread start
// and buffers; for ORWL, from the end of the schedule (A and B exist in every process),
// the allocation of C and of the mirrors, the first touch of C, of the panel locations and
// of the mirrors, and the first multiplication (no kernel warm-up). Each comes with the page
// faults of its processes in that interval (getrusage, added over the job's processes).
// The two alternate, -rounds times per N, so that a neighbour's load falls on both; with
// -hugepages default,on,off ORWL runs three times per round: with the system's huge-page
// policy, with ORWL_HUGEPAGES=on (transparent huge pages asked for) and with off.
// It prints every measurement, then per N and variant the median, smallest and largest
// ratio C seconds / ORWL seconds of the rounds (above 1: ORWL is faster), and writes
// first.txt and first.json into -out.

func init() {
	register(command{
		name:    "first",
		summary: "the first multiplication of examples/matmul against C OpenBLAS's cold cblas_dgemm call, with page faults",
		files:   tableFiles("first"),
		setup:   benchFirst,
	})
}

// firstRow is one measurement of the first command, or (Round 0) the summary of a variant.
type firstRow struct {
	N      int     `json:"n"`
	Round  int     `json:"round"` // 1..rounds; 0 for a summary row
	Impl   string  `json:"impl"`  // "c-cold", "orwl", "orwl ORWL_HUGEPAGES=on" or "=off"
	Procs  int     `json:"procs"`
	Grid   string  `json:"grid,omitempty"`
	NB     int     `json:"nb,omitempty"`
	Kernel string  `json:"kernel"`
	Secs   float64 `json:"seconds"` // a summary row: the median
	Faults int64   `json:"page_faults"`
	// Ratio is C's seconds / this row's in the same round (a summary row: the median);
	// Min and Max bound it over the rounds (summary rows).
	Ratio    float64 `json:"ratio_c_over_orwl,omitempty"`
	Min      float64 `json:"ratio_min,omitempty"`
	Max      float64 `json:"ratio_max,omitempty"`
	Verified *bool   `json:"verified,omitempty"`
}

func benchFirst(fs *flag.FlagSet) func(rep *report) error {
	sizes := fs.String("n", "4096,6144", "comma-separated matrix sizes N")
	rounds := fs.Int("rounds", 5, "alternations of C and ORWL per N")
	huge := fs.String("hugepages", "default", "ORWL variants per round: default (ORWL_HUGEPAGES as inherited), on, off (ORWL_HUGEPAGES=on, =off), or a list")
	crefPath := fs.String("cref", "", "prebuilt C reference program (default: build it with gcc)")
	return func(rep *report) error {
		ns, err := intList(*sizes)
		if err != nil {
			return badFlags("-n: %w", err)
		}
		variants := splitList(*huge)
		for _, v := range variants {
			if v != "default" && v != "on" && v != "off" {
				return badFlags("-hugepages: %q is not default, on or off", v)
			}
		}
		if *rounds < 1 || len(variants) == 0 {
			return badFlags("-rounds must be at least 1 and -hugepages name a variant")
		}
		kernel, err := fastestCPUKernel()
		if err != nil {
			return err
		}
		tmp, err := os.MkdirTemp("", "orwl-first-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		c, err := buildCref(tmp, *crefPath)
		if err != nil {
			return fmt.Errorf("the C reference is needed: %w", err)
		}
		cores := runtime.NumCPU()
		g := grid.Square(cores)
		rep.header("%d cores; C: cblas_dgemm with OpenBLAS's default threads; orwl: examples/matmul's defaults, %d processes, grid %s, kernel %s, no warm-up",
			cores, cores, g, kernel)
		rep.line("%6s %5s  %-26s %9s %11s %9s\n", "N", "round", "impl", "seconds", "page-faults", "C/orwl")
		var rows []firstRow
		emit := func(r firstRow) {
			rows = append(rows, r)
			rep.row(r)
			ratio := ""
			if r.Ratio > 0 {
				ratio = fmt.Sprintf("%.3f", r.Ratio)
			}
			rep.line("%6d %5d  %-26s %9.3f %11d %9s\n", r.N, r.Round, r.Impl, r.Secs, r.Faults, ratio)
		}
		for _, n := range ns {
			nb := summa.DefaultNB(n, g)
			for round := 1; round <= *rounds; round++ {
				cs, cf, err := c.cold(n, 0)
				if err != nil {
					return err
				}
				emit(firstRow{N: n, Round: round, Impl: "c-cold", Procs: 1, Kernel: "openblas", Secs: cs, Faults: cf})
				for _, v := range variants {
					r, err := coldORWL(n, nb, g, kernel, max(1, cores/g.Tasks()), v)
					if err != nil {
						return err
					}
					r.Round, r.Ratio = round, cs/r.Secs
					emit(r)
				}
			}
		}
		rep.line("\n%6s  %-26s %9s %11s %9s %9s %9s\n", "N", "impl", "median-s", "page-faults", "C/orwl", "min", "max")
		for _, s := range firstSummary(rows) {
			rows = append(rows, s)
			rep.row(s)
			ratios := ""
			if s.Ratio > 0 {
				ratios = fmt.Sprintf(" %9.3f %9.3f %9.3f", s.Ratio, s.Min, s.Max)
			}
			rep.line("%6d  %-26s %9.3f %11d%s\n", s.N, s.Impl, s.Secs, s.Faults, ratios)
		}
		return rep.write(rows)
	}
}

// coldORWL runs one ORWL job of examples/matmul's defaults, one multiplication without
// warm-up, and returns its first multiplication; huge is "default" (ORWL_HUGEPAGES as
// inherited), "on" or "off".
func coldORWL(n, nb int, g grid.Grid, kernel string, threads int, huge string) (firstRow, error) {
	procs := g.Tasks()
	job := orwlJob{N: n, NB: nb, Grid: g.String(), Kernels: slices.Repeat([]string{kernel}, procs), Threads: threads, Reps: 1, Cold: true}
	spec, _ := json.Marshal(job)
	env := []string{matmulChildEnv + "=" + string(spec)}
	impl := "orwl"
	if huge != "default" {
		env = append(env, "ORWL_HUGEPAGES="+huge)
		impl += " ORWL_HUGEPAGES=" + huge
	}
	lines, err := launchSelfLines(procs, []string{"matmul"}, env)
	if err != nil {
		return firstRow{}, err
	}
	var res orwlResult
	if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
		return firstRow{}, err
	}
	if !res.Verified {
		return firstRow{}, fmt.Errorf("orwl N=%d: the product did not verify", n)
	}
	return firstRow{N: n, Impl: impl, Procs: procs, Grid: g.String(), NB: nb, Kernel: kernel,
		Secs: res.FirstSeconds, Faults: res.FirstFaults, Verified: &res.Verified}, nil
}

// firstSummary returns, per N and implementation in the order of rows, the median seconds,
// page faults and ratio of the rounds, with the smallest and largest ratio.
func firstSummary(rows []firstRow) []firstRow {
	type key struct {
		n    int
		impl string
	}
	var order []key
	group := map[key][]firstRow{}
	for _, r := range rows {
		k := key{r.N, r.Impl}
		if _, seen := group[k]; !seen {
			order = append(order, k)
		}
		group[k] = append(group[k], r)
	}
	var sums []firstRow
	for _, k := range order {
		g := group[k]
		s := g[0]
		s.Round = 0
		var secs, faults, ratios []float64
		for _, r := range g {
			secs, faults, ratios = append(secs, r.Secs), append(faults, float64(r.Faults)), append(ratios, r.Ratio)
		}
		slices.Sort(secs)
		slices.Sort(faults)
		slices.Sort(ratios)
		s.Secs, s.Faults = median(secs), int64(median(faults))
		if s.Ratio > 0 {
			s.Ratio, s.Min, s.Max = median(ratios), ratios[0], ratios[len(ratios)-1]
		}
		sums = append(sums, s)
	}
	return sums
}
