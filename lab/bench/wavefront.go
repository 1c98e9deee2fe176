package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/examples/levenshtein/wavefront"
)

// wavefront: the edit distance of two generated strings of -n characters by the ORWL
// pipeline of examples/levenshtein (package wavefront), in GCUPS (cells of the matrix of
// partial distances per second), against C references built here with gcc (-cflags, with
// -fopenmp) from lab/bench/wavefront/wavefront.c:
//
//   - sequential: C's textbook loop one row at a time (c-seq1, the reference of the group),
//     the same with two rows per pass (c-seq2), C with the kernel of the Go tasks (c-seq3:
//     three rows per pass, a table of costs per row, H = D - i - j), Go's loop alone
//     (go-seq, wavefront.Sequential) and ORWL with one task in one process (orwl);
//   - parallel: C's blocked wavefront with OpenMP on -procs threads, tiles of -block x
//     -block computed by c-seq3's kernel (c-omp, the reference), and ORWL with -procs tasks
//     in one process, in -procs processes, and with two tasks per process;
//   - block sweep: ORWL in -procs processes against C's OpenMP wavefront, both with the
//     block sizes of -blocks.
//
// Every contender prints the distance; a row counts only when it equals every other's.
// The contenders of a group run in interleaved rounds (-rounds); each row gives the best
// time, its GCUPS and the ratio to the group's reference from the same run. Without gcc the
// C rows are skipped, saying why. It prints the table (or with -json one JSON object per
// row), and writes wavefront.txt and wavefront.json into -out.

func init() {
	register(command{
		name:     "wavefront",
		summary:  "ORWL Levenshtein wavefront against C's sequential loop and an OpenMP blocked wavefront, by block size",
		files:    tableFiles("wavefront"),
		children: []child{jsonChild(wavefrontChildEnv, wavefrontChild)},
		setup:    benchWavefront,
	})
}

//go:embed wavefront/wavefront.c
var wavefrontSource []byte

// wavefrontChildEnv marks a process of an orwl row; it holds the wavefrontSpec in JSON.
const wavefrontChildEnv = "ORWL_BENCH_WAVEFRONT_CHILD"

// Seeds of the generated strings A and B; examples/levenshtein -gen uses the same.
const wavefrontSeedA, wavefrontSeedB = 1, 2

// wavefrontSpec is one ORWL run: strings of N characters generated from the seeds.
type wavefrontSpec struct{ N, Tasks, Block int }

// wavefrontRun is what one run of any contender reports.
type wavefrontRun struct {
	Distance int     `json:"distance"`
	Seconds  float64 `json:"seconds"`
}

// wavefrontRow is one contender of one group.
type wavefrontRow struct {
	Group    string  `json:"group"` // "sequential", "parallel" or "block sweep"
	Name     string  `json:"name"`  // c-seq1, c-seq2, c-seq3, go-seq, orwl, c-omp
	Tasks    int     `json:"tasks"` // tasks, or threads of c-omp
	Procs    int     `json:"procs"`
	Block    int     `json:"block"` // rows per block (orwl), tile side (c-omp); 0: none
	LA       int     `json:"la"`
	LB       int     `json:"lb"`
	Seconds  float64 `json:"seconds"` // best of the rounds
	Median   float64 `json:"median_seconds"`
	GCUPS    float64 `json:"gcups"` // of the best round
	Ref      string  `json:"ref"`   // the contender the ratio compares with ("" for a reference)
	Ratio    float64 `json:"ratio"` // GCUPS / the reference's GCUPS in the same run
	Distance int     `json:"distance"`
	Checked  bool    `json:"checked"` // the distance equals every other contender's
}

// wavefrontContender is one program of a group.
type wavefrontContender struct {
	row wavefrontRow // what the row shows of it
	run func() (wavefrontRun, error)
}

func benchWavefront(fs *flag.FlagSet) func(rep *report) error {
	n := fs.Int("n", 100000, "characters of each generated string")
	procs := fs.Int("procs", 2, "processes (and OpenMP threads) of the parallel rows")
	block := fs.Int("block", 1024, "rows per block of ORWL and tile side of C's OpenMP wavefront in the sequential and parallel groups")
	blockList := fs.String("blocks", "128,512,2048,8192", "comma-separated block sizes of the sweep (empty: no sweep)")
	rounds := fs.Int("rounds", 3, "interleaved rounds; every contender's best is reported")
	cflags := fs.String("cflags", "-O3 -fno-tree-reassoc", "gcc flags of the C references (-fopenmp is added)")
	return func(rep *report) error {
		var blocks []int
		if strings.TrimSpace(*blockList) != "" {
			var err error
			if blocks, err = intList(*blockList); err != nil {
				return badFlags("-blocks: %w", err)
			}
		}
		if *n < 1 || *procs < 1 || *block < 1 || *rounds < 1 {
			return badFlags("-n, -procs, -block and -rounds must be at least 1")
		}

		dir, err := os.MkdirTemp("", "orwl-bench-wavefront")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		a, b := wavefront.Generate(*n, wavefrontSeedA), wavefront.Generate(*n, wavefrontSeedB)
		fa, fb := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
		if err := errors.Join(os.WriteFile(fa, a, 0o644), os.WriteFile(fb, b, 0o644)); err != nil {
			return err
		}
		cbin, err := buildWavefrontC(dir, strings.Fields(*cflags))
		if err != nil {
			fmt.Fprintf(os.Stderr, "wavefront: skipping the C references: %v\n", err)
		}
		// c is a C reference: seq1, seq2 and seq3 on one thread, omp on threads with tiles of block.
		c := func(mode string, threads, block int) wavefrontContender {
			args := []string{mode, fa, fb}
			if mode == "omp" {
				args = append(args, strconv.Itoa(block))
			}
			return wavefrontContender{wavefrontRow{Name: "c-" + mode, Tasks: threads, Procs: 1, Block: block},
				func() (wavefrontRun, error) { return runWavefrontC(cbin, threads, args...) }}
		}
		orwlRun := func(tasks, procs, block int) wavefrontContender {
			spec := wavefrontSpec{N: *n, Tasks: tasks, Block: block}
			return wavefrontContender{wavefrontRow{Name: "orwl", Tasks: tasks, Procs: procs, Block: block}, func() (wavefrontRun, error) {
				if procs == 1 {
					return runWavefront(a, b, tasks, block)
				}
				var r wavefrontRun
				return r, launchSelf(procs, []string{"wavefront"}, wavefrontChildEnv, spec, &r)
			}}
		}
		goSeq := wavefrontContender{wavefrontRow{Name: "go-seq", Tasks: 1, Procs: 1}, func() (wavefrontRun, error) {
			start := time.Now()
			d := wavefront.Sequential(a, b)
			return wavefrontRun{Distance: d, Seconds: time.Since(start).Seconds()}, nil
		}}
		p, bs := *procs, *block
		type group struct {
			name string
			cs   []wavefrontContender
		}
		groups := []group{
			{"sequential", []wavefrontContender{c("seq1", 1, 0), c("seq2", 1, 0), c("seq3", 1, 0), goSeq, orwlRun(1, 1, bs)}},
			{"parallel", []wavefrontContender{c("omp", p, bs), orwlRun(p, 1, bs), orwlRun(p, p, bs), orwlRun(2*p, p, bs)}},
		}
		for _, blk := range blocks {
			groups = append(groups, group{"block sweep", []wavefrontContender{c("omp", p, blk), orwlRun(p, p, blk)}})
		}

		rep.header("%s, %d cores; two generated strings of %d characters; best of %d interleaved rounds; C: gcc %s -fopenmp",
			cpuModel(), runtime.NumCPU(), *n, *rounds, *cflags)
		rep.line("%-12s %-7s %5s %5s %6s %10s %7s  %s\n", "group", "name", "tasks", "procs", "block", "seconds", "GCUPS", "ratio")
		var rows []wavefrontRow
		for _, g := range groups {
			cs := g.cs
			if cbin == "" {
				cs = slices.DeleteFunc(slices.Clone(cs), func(c wavefrontContender) bool { return strings.HasPrefix(c.row.Name, "c-") })
			}
			grows, err := measureWavefront(g.name, cs, *n, *rounds)
			if err != nil {
				return err
			}
			for _, r := range grows {
				rep.row(r)
				rep.line("%-12s %-7s %5d %5d %6s %10.3f %7.3f  %s\n", r.Group, r.Name, r.Tasks, r.Procs, blockText(r.Block), r.Seconds, r.GCUPS, r.ratioText())
			}
			rows = append(rows, grows...)
		}
		return rep.write(rows)
	}
}

// measureWavefront runs the contenders of a group in interleaved rounds and returns their
// rows; the first contender is the reference of the others.
func measureWavefront(group string, cs []wavefrontContender, n, rounds int) ([]wavefrontRow, error) {
	times := make([][]float64, len(cs))
	dists := make([]map[int]bool, len(cs))
	all := map[int]bool{}
	for r := range rounds {
		for i, c := range cs {
			res, err := c.run()
			if err != nil {
				return nil, fmt.Errorf("%s %s, %d tasks: %w", group, c.row.Name, c.row.Tasks, err)
			}
			if dists[i] == nil {
				dists[i] = map[int]bool{}
			}
			dists[i][res.Distance], all[res.Distance] = true, true
			times[i] = append(times[i], res.Seconds)
			fmt.Fprintf(os.Stderr, "wavefront: %s %s, %d tasks, %d processes, block %d, round %d: distance %d in %.3fs\n",
				group, c.row.Name, c.row.Tasks, c.row.Procs, c.row.Block, r+1, res.Distance, res.Seconds)
		}
	}
	if len(all) != 1 {
		fmt.Fprintf(os.Stderr, "wavefront: %s: the contenders disagree on the distance: %v\n", group, slices.Sorted(maps.Keys(all)))
	}
	rows := make([]wavefrontRow, len(cs))
	for i, c := range cs {
		ts := slices.Sorted(slices.Values(times[i]))
		r := c.row
		r.Group, r.LA, r.LB = group, n, n
		r.Seconds, r.Median = ts[0], ts[len(ts)/2]
		r.GCUPS = wavefront.GCUPS(n, n, r.Seconds)
		r.Checked = len(all) == 1
		for d := range dists[i] {
			r.Distance = d
		}
		if i > 0 {
			r.Ref, r.Ratio = cs[0].row.Name, r.GCUPS/rows[0].GCUPS
		}
		rows[i] = r
	}
	return rows, nil
}

// buildWavefrontC compiles the C references with gcc and flags (and -fopenmp) into dir.
func buildWavefrontC(dir string, flags []string) (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", errors.New("gcc not found (install Debian package gcc)")
	}
	src, bin := filepath.Join(dir, "wavefront.c"), filepath.Join(dir, "wavefront")
	if err := os.WriteFile(src, wavefrontSource, 0o644); err != nil {
		return "", err
	}
	args := append(slices.Clone(flags), "-fopenmp", "-o", bin, src)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// runWavefrontC runs the C reference bin with args on threads OpenMP threads.
func runWavefrontC(bin string, threads int, args ...string) (wavefrontRun, error) {
	var r wavefrontRun
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	d, err := field(string(out), "distance")
	if err == nil {
		r.Distance, err = strconv.Atoi(d)
	}
	if err == nil {
		var s string
		if s, err = field(string(out), "seconds"); err == nil {
			r.Seconds, err = strconv.ParseFloat(s, 64)
		}
	}
	return r, err
}

// runWavefront runs the ORWL job of tasks in this process.
func runWavefront(a, b []byte, tasks, block int) (wavefrontRun, error) {
	res, err := wavefront.Run(context.Background(), wavefront.Params{A: a, B: b, Tasks: tasks, Block: block})
	if err != nil || res == nil {
		return wavefrontRun{}, err
	}
	return wavefrontRun{Distance: res.Distance, Seconds: res.Seconds}, nil
}

// wavefrontChild is one process of an orwl row (its variable holds a wavefrontSpec in JSON); the process
// of task 0 prints its wavefrontRun as JSON.
func wavefrontChild(s wavefrontSpec) error {
	a, b := wavefront.Generate(s.N, wavefrontSeedA), wavefront.Generate(s.N, wavefrontSeedB)
	res, err := wavefront.Run(context.Background(), wavefront.Params{A: a, B: b, Tasks: s.Tasks, Block: s.Block})
	if res != nil {
		printJSON(wavefrontRun{Distance: res.Distance, Seconds: res.Seconds})
	}
	return err
}

// blockText formats a block size, "-" for none.
func blockText(b int) string {
	if b == 0 {
		return "-"
	}
	return strconv.Itoa(b)
}

// ratioText formats the row's ratio to its reference, and a failed check.
func (r wavefrontRow) ratioText() string {
	s := ""
	if r.Ref != "" {
		s = fmt.Sprintf("%.2fx %s", r.Ratio, r.Ref)
	}
	if !r.Checked {
		s += " DISTANCES DIFFER"
	}
	return s
}
