package main

import (
	"bytes"
	"cmp"
	"context"
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
	"sync"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

// scale: jobs of many processes on this machine, one task each, processes outnumbering
// cores as they do when many share a node. For each -procs N it runs the 1-D Jacobi stencil
// of examples/stencil (1000 cells per task by default, -cells) under cmd/orwlrun, once per
// -variants (an environment, such as ORWL_SPIN=0), and the same stencil in C
// (lab/bench/stencil/stencil.c) under Open MPI's mpirun --oversubscribe over shared memory
// (vader or sm), and with -floor the same stencil in Go without ORWL (lab/bench/floor: the
// edges through a cache line of shared memory per neighbour, as Open MPI's fastboxes, what
// a Go process itself costs), one after the other, and reports for each run:
//
//   - finished: whether it ended within -timeout with its result line and the sequential
//     sweep's checksum; a run that fails or times out is a row with its error, and the
//     command goes on;
//   - seconds: from the launch to the launcher's exit; start: that less the iterations
//     (iters × per iteration), what starting and ending the job cost;
//   - per iteration: as the program reports it (the slowest task's, warm-up left out);
//   - per process, sampled every -sample from /proc while the job runs (its processes are
//     the launcher's descendants running the program), in one more run of each contender
//     after the timed ones, made long enough for sampledPeriods samples, whose times are
//     not kept: a sample reads thousands of /proc files, which took a quarter of the cores
//     at 32-64 processes and slowed the sampled job by 25-30%, so the times come from runs
//     that nothing samples; the peak resident set (VmRSS) and
//     its shared part (RssShmem), threads (Threads), open file descriptors and, of them,
//     TCP connections established; the mean over the processes and the largest;
//   - shm: the peak growth of the host's shared memory (/proc/meminfo Shmem: memfd segments
//     and /dev/shm files alike) over the run, in MiB, all processes together;
//   - beats/s: heartbeat messages each process sends per second, derived, since nothing
//     outside the process counts them: its established connections (mean) over the heartbeat
//     period, the transport's default PeerTimeout/10 at most 500 ms (300 ms for the default 3 s,
//     or ORWL_PEER_TIMEOUT of the variant); it receives as many. The derivation holds while
//     the transport beats on every connection every period (transport.Mesh.beat). MPI sends
//     none.
//
// Runs are measured one at a time, so that a job alone shares the cores only with whatever
// else the machine runs; the ratio orwl/mpi of a row compares runs of the same N in the same
// round. -bin runs a prebuilt examples/stencil instead of building it from the checkout (a
// build of another commit, to compare two versions in one run).
//
// It prints the table (or with -json one JSON object per row) and writes scale.txt and
// scale.json into -out.

func init() {
	register(command{
		name:    "scale",
		summary: "jobs of 4..256 processes on this machine: start, per iteration, memory, threads, fds, shm, beats, beside Open MPI",
		files:   tableFiles("scale"),
		setup:   benchScale,
	})
}

// scaleRow is one contender at one number of processes, over the rounds.
type scaleRow struct {
	Procs     int    `json:"procs"`
	Contender string `json:"contender"` // "orwl", "orwl" and its variant, "go-floor", or "mpi-vader" (mpi-sm)
	Runs      int    `json:"runs"`
	Finished  int    `json:"finished"` // runs that ended with a result
	Checked   bool   `json:"checked"`  // every result's checksum is the sequential sweep's
	Error     string `json:"error,omitempty"`
	Iters     int    `json:"iters"`
	// Of the finished timed runs, in seconds: the best and the median.
	PerIteration stat `json:"per_iteration"`
	Start        stat `json:"start"` // launch to exit less Iters × PerIteration
	// Per process, the largest over the runs of each process's peak: mean over the
	// processes and largest.
	RSSMiB      spread  `json:"rss_mib"`
	ShmemMiB    spread  `json:"rss_shmem_mib"`
	Threads     spread  `json:"threads"`
	FDs         spread  `json:"fds"`
	Conns       spread  `json:"tcp_established"`
	HostShmMiB  float64 `json:"host_shm_mib"`  // peak growth of /proc/meminfo Shmem
	BeatsPerSec float64 `json:"beats_per_sec"` // derived: Conns.Mean over the heartbeat period
	Seen        int     `json:"seen"`          // processes of the job that the samples saw, at most
	Ratio       float64 `json:"ratio"`         // best per iteration over the MPI run's, 0 when none
	Launched    string  `json:"launched"`      // time of day of the first run, UTC
}

// stat is a time over runs: the best and the median.
type stat struct {
	Best   float64 `json:"best"`
	Median float64 `json:"median"`
}

// spread is a per-process figure: the mean over the processes and the largest.
type spread struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func benchScale(fs *flag.FlagSet) func(rep *report) error {
	procList := fs.String("procs", "4,8,16,32,64,128", "comma-separated numbers of processes (one task each); 256 and more on request")
	cells := fs.Int("cells", 1000, "cells per task")
	iters := fs.Int("iters", 4000, "iterations of each run (at 128 processes, 1000 gave 516-670µs per iteration in three runs, 4000 500-523µs; Open MPI 330-429µs and 345-382µs)")
	variantList := fs.String("variants", "default", `semicolon-separated variants of the orwl runs, each "default" or space-separated NAME=value of its environment, and bin=PATH for a prebuilt examples/stencil (another commit's), e.g. "default;ORWL_SPIN=0"`)
	timeout := fs.Duration("timeout", 2*time.Minute, "time after which a run is killed and reported as such")
	sample := fs.Duration("sample", 100*time.Millisecond, "period of the /proc samples, in the round that is not timed (a sample of 64 processes reads some 10000 files)")
	rounds := fs.Int("rounds", 2, "interleaved timed rounds of the contenders of each N, then one that samples /proc; best and median reported")
	withMPI := fs.Bool("mpi", true, "also run the C MPI reference when Open MPI's mpicc and mpirun are present")
	withFloor := fs.Bool("floor", true, "also run lab/bench/floor, the stencil in Go without ORWL (go-floor)")
	return func(rep *report) error {
		procs, err := intList(*procList)
		if err != nil {
			return badFlags("-procs: %w", err)
		}
		if *cells < 1 || *iters < 10 || *timeout <= 0 || *sample <= 0 || *rounds < 1 {
			return badFlags("-cells and -rounds must be at least 1, -iters at least 10, -timeout and -sample positive")
		}
		variants, err := scaleVariants(*variantList)
		if err != nil {
			return badFlags("-variants: %w", err)
		}
		dir, err := os.MkdirTemp("", "orwl-bench-scale")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bins, err := goBuild(dir, "cmd/orwlrun", "examples/stencil", "lab/bench/floor")
		if err != nil {
			return err
		}
		launcher, program, floor := bins[0], bins[1], bins[2]
		var mpi *openMPI
		var cbin string
		if *withMPI {
			var cleanup func()
			mpi, cbin, cleanup = buildPeer("scale", "the C MPI reference", "stencil", stencilSource, "-O2")
			defer cleanup()
		}

		rep.header("%s, %d cores; 1-D stencil, %d cells per task, %d iterations; best of %d interleaved timed rounds (median in the json), then a round that samples /proc; per process: mean/max over the processes",
			cpuModel(), runtime.NumCPU(), *cells, *iters, *rounds)
		rep.line("%5s %-30s %-6s %8s %10s %7s %11s %7s %9s %9s %8s %8s %s\n", "procs", "contender", "done", "start s", "per-iter", "/mpi",
			"RSS MiB", "threads", "fds", "tcp", "shm MiB", "beats/s", "error")
		var rows []scaleRow
		for _, n := range procs {
			var jobs []scaleJob
			common := scaleJob{procs: n, iters: *iters, cells: *cells, timeout: *timeout, sample: *sample}
			for _, v := range variants {
				j := common
				j.contender, j.env, j.program, j.beat, j.parse = v.name, v.env, cmp.Or(v.bin, program), heartbeatPeriod(v.env), parseORWLResult
				j.argv = func(iters int) []string {
					return []string{launcher, "-np", strconv.Itoa(n), j.program, "-n", strconv.Itoa(n * *cells), "-iters", strconv.Itoa(iters)}
				}
				jobs = append(jobs, j)
			}
			if *withFloor {
				j := common
				j.contender, j.program, j.parse = "go-floor", floor, parseORWLResult
				j.argv = func(iters int) []string {
					return []string{floor, "-np", strconv.Itoa(n), "-n", strconv.Itoa(n * *cells), "-iters", strconv.Itoa(iters)}
				}
				jobs = append(jobs, j)
			}
			if mpi != nil {
				j := common
				j.contender, j.program, j.parse = "mpi-"+mpi.shm, cbin, parseMPIResult
				j.argv = func(iters int) []string {
					return append([]string{mpi.run}, mpi.args(n, mpi.shm, nil, cbin, "1", strconv.Itoa(n**cells), "1", strconv.Itoa(n), "1", strconv.Itoa(iters))...)
				}
				jobs = append(jobs, j)
			}
			runs := make([][]scaleRun, len(jobs))
			for round := range *rounds + 1 { // the last round samples /proc, the others are timed
				for i, j := range jobs {
					if round < *rounds {
						j.sample = 0
					} else {
						j.iters = sampledIters(j, runs[i])
					}
					r := runScale(j)
					fmt.Fprintf(os.Stderr, "scale: %d processes, %s: %s\n", n, j.contender, r)
					runs[i] = append(runs[i], r)
				}
			}
			var nrows []scaleRow
			for i, j := range jobs {
				nrows = append(nrows, summarize(j, runs[i]))
			}
			setRatios(nrows)
			for _, r := range nrows {
				rows = append(rows, r)
				rep.row(r)
				rep.line("%s\n", r.line())
			}
		}
		return rep.write(rows)
	}
}

// scaleVariant is a variant of the orwl runs: an environment, another build.
type scaleVariant struct {
	name string   // "orwl", or "orwl " and the variant
	env  []string // NAME=value
	bin  string   // a prebuilt examples/stencil, or "" for the checkout's
}

// scaleVariants reads -variants.
func scaleVariants(list string) ([]scaleVariant, error) {
	var out []scaleVariant
	for _, s := range strings.Split(list, ";") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		v := scaleVariant{name: "orwl"}
		if s != "default" {
			for _, e := range strings.Fields(s) {
				name, value, ok := strings.Cut(e, "=")
				switch {
				case !ok || name == "":
					return nil, fmt.Errorf("%q is neither NAME=value nor bin=PATH", e)
				case name == "bin":
					abs, err := filepath.Abs(value)
					if err == nil {
						_, err = os.Stat(abs)
					}
					if err != nil {
						return nil, fmt.Errorf("bin=%s: %v", value, err)
					}
					v.bin = abs
				default:
					v.env = append(v.env, e)
				}
			}
			v.name += " " + s
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q names no variant", list)
	}
	return out, nil
}

// heartbeatPeriod is the transport's default heartbeat period under the environment env:
// PeerTimeout/10 (ORWL_PEER_TIMEOUT, else 3s), at most 500ms.
func heartbeatPeriod(env []string) time.Duration {
	timeout := 3 * time.Second
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "ORWL_PEER_TIMEOUT="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				timeout = d
			}
		}
	}
	return max(time.Millisecond, min(500*time.Millisecond, timeout/10))
}

// scaleJob is a contender at one number of processes.
type scaleJob struct {
	procs     int
	contender string
	argv      func(iters int) []string // the launcher's command line
	program   string                   // the program the launcher starts: its processes are the job's
	env       []string                 // added to this process's environment
	beat      time.Duration            // heartbeat period; 0: the program sends none
	// parse reads the result from the job's output: seconds per iteration and checksum.
	parse        func(out string) (perIteration float64, checksum string, err error)
	iters, cells int
	timeout      time.Duration
	sample       time.Duration // period of the /proc samples; 0: none, a timed run
}

// scaleRun is what one run of a job gives.
type scaleRun struct {
	finished     bool
	checked      bool
	err          string
	seconds      float64 // launch to exit
	perIteration float64
	launched     time.Time
	sampled      bool               // its times are not kept (see benchScale)
	peaks        map[int]procSample // each process's peak, by pid, when sampled
	hostShm      int64              // peak growth of the host's shared memory, bytes
}

// String says in a few words how the run went.
func (r scaleRun) String() string {
	switch {
	case !r.finished:
		return "failed after " + strconv.FormatFloat(r.seconds, 'f', 2, 64) + "s: " + r.err
	case r.sampled:
		return fmt.Sprintf("sampled, %d processes seen (%s per iteration, %.2fs in all, not kept)", len(r.peaks), seconds(r.perIteration), r.seconds)
	}
	return fmt.Sprintf("%s per iteration, %.2fs in all", seconds(r.perIteration), r.seconds)
}

// runScale runs j once, samples its processes while it runs when j.sample is not 0, and
// says how it went: a run that fails or does not end within j.timeout (then killed, with
// all its processes) has its error.
func runScale(j scaleJob) scaleRun {
	r := scaleRun{launched: time.Now(), sampled: j.sample > 0}
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	defer cancel()
	argv := j.argv(j.iters)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), j.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the whole job is killed on timeout
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	base := hostShmem()
	if err := cmd.Start(); err != nil {
		r.err = err.Error()
		return r
	}
	stop := make(chan struct{})
	shmPeak := base
	var wg sync.WaitGroup
	if r.sampled {
		wg.Go(func() { r.peaks, shmPeak = sampleJob(cmd.Process.Pid, filepath.Base(j.program), j.sample, stop) })
	}
	err := cmd.Wait()
	r.seconds = time.Since(r.launched).Seconds()
	close(stop)
	wg.Wait()
	r.hostShm = max(0, shmPeak-base)
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Sprintf("no end within %v (killed): %s", j.timeout, lastLines(out.String(), 3))
	case err != nil:
		r.err = fmt.Sprintf("%v: %s", err, failure(out.String()))
	default:
		var sum string
		if r.perIteration, sum, err = j.parse(out.String()); err != nil {
			r.err = err.Error()
			break
		}
		r.finished = true
		r.checked = sum == scaleChecksum(j.procs, j.cells, j.iters)
	}
	return r
}

// sampledIters returns the iterations of j's run that samples /proc: j's, or enough for the
// run to last sampledPeriods sample periods at the best time per iteration of its timed
// runs, so that a short job is seen while it runs.
func sampledIters(j scaleJob, timed []scaleRun) int {
	best := 0.0
	for _, r := range timed {
		if r.finished && (best == 0 || r.perIteration < best) {
			best = r.perIteration
		}
	}
	if best == 0 {
		return j.iters
	}
	return max(j.iters, int(math.Ceil(sampledPeriods*j.sample.Seconds()/best)))
}

// sampledPeriods is how many sample periods a sampled run's iterations last at least.
const sampledPeriods = 10

// summarize makes the row of job j from its runs.
func summarize(j scaleJob, runs []scaleRun) scaleRow {
	row := scaleRow{Procs: j.procs, Contender: j.contender, Runs: len(runs), Iters: j.iters, Checked: true,
		Launched: runs[0].launched.UTC().Format("15:04:05")}
	var perIter, start []float64
	for _, r := range runs {
		if !r.finished {
			if row.Error == "" {
				row.Error = r.err
			}
			continue
		}
		row.Finished++
		row.Checked = row.Checked && r.checked
		if !r.sampled {
			perIter = append(perIter, r.perIteration)
			start = append(start, r.seconds-float64(j.iters)*r.perIteration)
		}
	}
	row.PerIteration, row.Start = bestMedian(perIter), bestMedian(start)
	const mib = 1 << 20
	for _, r := range runs {
		row.Seen = max(row.Seen, len(r.peaks))
		row.HostShmMiB = max(row.HostShmMiB, float64(r.hostShm)/mib)
		row.RSSMiB = row.RSSMiB.larger(over(r.peaks, func(p procSample) float64 { return float64(p.rss) / mib }))
		row.ShmemMiB = row.ShmemMiB.larger(over(r.peaks, func(p procSample) float64 { return float64(p.shmem) / mib }))
		row.Threads = row.Threads.larger(over(r.peaks, func(p procSample) float64 { return float64(p.threads) }))
		row.FDs = row.FDs.larger(over(r.peaks, func(p procSample) float64 { return float64(p.fds) }))
		row.Conns = row.Conns.larger(over(r.peaks, func(p procSample) float64 { return float64(p.established) }))
	}
	if j.beat > 0 {
		row.BeatsPerSec = row.Conns.Mean / j.beat.Seconds()
	}
	return row
}

// bestMedian returns the least and the median of xs (zero when empty).
func bestMedian(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	xs = slices.Sorted(slices.Values(xs))
	return stat{Best: xs[0], Median: xs[len(xs)/2]}
}

// over returns the mean and the largest of get over the processes of peaks.
func over(peaks map[int]procSample, get func(procSample) float64) spread {
	var s spread
	for _, p := range peaks {
		v := get(p)
		s.Mean += v / float64(len(peaks))
		s.Max = max(s.Max, v)
	}
	return s
}

// larger returns, field by field, the larger of s and t.
func (s spread) larger(t spread) spread {
	return spread{Mean: max(s.Mean, t.Mean), Max: max(s.Max, t.Max)}
}

// scaleChecksums caches the sequential sweep's checksums by job.
var scaleChecksums sync.Map

// scaleChecksum is the checksum of the sequential sweep of the line of n × cells cells.
func scaleChecksum(n, cells, iters int) string {
	key := [3]int{n, cells, iters}
	if v, ok := scaleChecksums.Load(key); ok {
		return v.(string)
	}
	p := stencilLayout{Dim: 1, PX: n, PY: 1}.sized(cells, false)
	p.Iters = iters
	sum := fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p)))
	scaleChecksums.Store(key, sum)
	return sum
}

// parseORWLResult reads examples/stencil's result line.
func parseORWLResult(out string) (float64, string, error) {
	v, err := field(out, "per-iteration")
	if err != nil {
		return 0, "", err
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, "", fmt.Errorf("per-iteration=%s: %v", v, err)
	}
	sum, err := field(out, "checksum")
	return d.Seconds(), sum, err
}

// parseMPIResult reads the C reference's result line.
func parseMPIResult(out string) (float64, string, error) {
	v, err := field(out, "per-iteration")
	if err != nil {
		return 0, "", err
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, "", fmt.Errorf("per-iteration=%s: %v", v, err)
	}
	sum, err := field(out, "checksum")
	return s, sum, err
}

// failure picks from a failed job's output what says why: the lines of the rank that
// orwlrun names as the cause ("orwlrun: rank R failed ..."), but its log's warnings, and
// orwlrun's line, or else the last three lines.
func failure(out string) string {
	var cause string
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "orwlrun: rank "); ok {
			if r, _, ok := strings.Cut(rest, " "); ok {
				cause = "[" + r + "] "
			}
		}
	}
	if cause == "" {
		return lastLines(out, 3)
	}
	var lines []string
	for line := range strings.Lines(out) {
		logged := strings.Contains(line, " WARN ") || strings.Contains(line, " INFO ") || strings.Contains(line, " DEBUG ")
		if strings.HasPrefix(line, cause) && !logged || strings.HasPrefix(line, "orwlrun: ") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return strings.Join(lines[max(0, len(lines)-4):], " | ")
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// procSample is what /proc says of one process: sizes in bytes.
type procSample struct {
	rss, shmem   int64
	threads, fds int
	established  int // TCP connections
}

// peak keeps, field by field, the larger of s and t.
func (s procSample) peak(t procSample) procSample {
	return procSample{rss: max(s.rss, t.rss), shmem: max(s.shmem, t.shmem), threads: max(s.threads, t.threads),
		fds: max(s.fds, t.fds), established: max(s.established, t.established)}
}

// sampleJob samples, every period until stop is closed, the descendants of pid whose command
// is name: the peak of each process, by pid, and the peak of the host's shared memory.
func sampleJob(pid int, name string, period time.Duration, stop <-chan struct{}) (map[int]procSample, int64) {
	peaks := map[int]procSample{}
	var shm int64
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		shm = max(shm, hostShmem())
		established := establishedSockets()
		for _, p := range descendants(pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) != truncComm(name) {
				continue
			}
			s, ok := readProc(p, established)
			if ok {
				peaks[p] = peaks[p].peak(s)
			}
		}
		select {
		case <-stop:
			return peaks, shm
		case <-t.C:
		}
	}
}

// truncComm is name as /proc/PID/comm shows it: at most 15 bytes.
func truncComm(name string) string { return name[:min(len(name), 15)] }

// descendants returns the processes under pid: from /proc/PID/task/TID/children, or where
// the kernel has no such file, from the parents in every /proc/PID/stat.
func descendants(pid int) []int {
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		kids, ok := children(queue[0])
		if !ok {
			return descendantsByParent(pid)
		}
		out = append(out, kids...)
		queue = append(queue, kids...)
	}
	return out
}

// children returns the children of process p, and false when the kernel does not list them
// (a process gone meanwhile has none).
func children(p int) ([]int, bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
	if err != nil {
		return nil, true
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
		if errors.Is(err, os.ErrNotExist) {
			if _, gone := os.Stat(fmt.Sprintf("/proc/%d/task/%s", p, t.Name())); gone == nil {
				return nil, false
			}
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, true
}

// descendantsByParent returns the processes under pid, from the parents in /proc/PID/stat.
func descendantsByParent(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if ppid, ok := statParent(string(b)); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// statParent reads the parent's pid in the text of /proc/PID/stat: the second field after
// the command, which is in parentheses and may hold spaces and parentheses itself.
func statParent(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// readProc reads process p's status and descriptors; established holds the inodes of the
// host's established TCP sockets.
func readProc(p int, established map[string]bool) (procSample, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
	if err != nil {
		return procSample{}, false
	}
	s := parseStatus(string(b))
	dir := fmt.Sprintf("/proc/%d/fd", p)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return procSample{}, false
	}
	s.fds = len(fds)
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok && established[strings.TrimSuffix(inode, "]")] {
			s.established++
		}
	}
	return s, true
}

// parseStatus reads VmRSS, RssShmem and Threads from the text of /proc/PID/status.
func parseStatus(status string) procSample {
	var s procSample
	for line := range strings.Lines(status) {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			s.rss = n << 10
		case "RssShmem":
			s.shmem = n << 10
		case "Threads":
			s.threads = int(n)
		}
	}
	return s
}

// establishedSockets returns the inodes of the host's established TCP sockets (IPv4 and
// IPv6), from /proc/net/tcp and tcp6.
func establishedSockets() map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if fs := strings.Fields(line); len(fs) >= 10 && fs[3] == "01" {
				out[fs[9]] = true
			}
		}
	}
	return out
}

// hostShmem returns the host's shared memory (/proc/meminfo Shmem) in bytes, or 0.
func hostShmem() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Shmem:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// setRatios gives each row of one N its best time per iteration over the MPI row's.
func setRatios(rows []scaleRow) {
	i := slices.IndexFunc(rows, func(r scaleRow) bool { return strings.HasPrefix(r.Contender, "mpi") })
	if i < 0 || rows[i].PerIteration.Best <= 0 {
		return
	}
	for k := range rows {
		if rows[k].Finished > 0 {
			rows[k].Ratio = rows[k].PerIteration.Best / rows[i].PerIteration.Best
		}
	}
}

// line formats the row for the table.
func (r scaleRow) line() string {
	done := fmt.Sprintf("%d/%d", r.Finished, r.Runs)
	if r.Finished > 0 && !r.Checked {
		done += "!sum"
	}
	ratio, perIter, start := "-", "-", "-"
	if r.Ratio > 0 {
		ratio = fmt.Sprintf("%.2f", r.Ratio)
	}
	if r.Finished > 0 {
		perIter, start = seconds(r.PerIteration.Best), fmt.Sprintf("%.2f", r.Start.Best)
	}
	pair := func(s spread, format string) string { return fmt.Sprintf(format+"/"+format, s.Mean, s.Max) }
	return fmt.Sprintf("%5d %-30s %-6s %8s %10s %7s %11s %7s %9s %9s %8.1f %8.0f %s", r.Procs, r.Contender, done, start, perIter, ratio,
		pair(r.RSSMiB, "%.1f"), pair(r.Threads, "%.0f"), pair(r.FDs, "%.0f"), pair(r.Conns, "%.0f"), r.HostShmMiB, r.BeatsPerSec, r.Error)
}

// scaleFigures formats the rows of the scale command for the figures page: per number of
// processes, the default orwl run beside Open MPI's and Go's without ORWL (go-floor), with
// what each ORWL process held.
func scaleFigures(rows []scaleRow) string {
	var b strings.Builder
	b.WriteString("\n| processes | ORWL per iteration | Open MPI | ratio | Go without ORWL (/MPI) | threads | RSS MiB | fds | TCP connections | heartbeats/s | start s (MPI) | finished |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	mpi, floor := map[int]scaleRow{}, map[int]scaleRow{}
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Contender, "mpi"):
			mpi[r.Procs] = r
		case r.Contender == "go-floor":
			floor[r.Procs] = r
		}
	}
	for _, r := range rows {
		if r.Contender != "orwl" {
			continue
		}
		m := mpi[r.Procs]
		per, ref, ratio, start := "-", "-", "-", "-"
		if r.Finished > 0 {
			per, start = seconds(r.PerIteration.Best), fmt.Sprintf("%.2f", r.Start.Best)
		}
		if m.Finished > 0 {
			ref, start = seconds(m.PerIteration.Best), fmt.Sprintf("%s (%.2f)", start, m.Start.Best)
		}
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		goAlone := "-"
		if f := floor[r.Procs]; f.Finished > 0 {
			goAlone = seconds(f.PerIteration.Best)
			if f.Ratio > 0 {
				goAlone += fmt.Sprintf(" (%.2fx)", f.Ratio)
			}
		}
		done := fmt.Sprintf("%d of %d", r.Finished, r.Runs)
		if r.Error != "" {
			done += ": " + strings.ReplaceAll(r.Error, "|", "/")
		}
		perProcess := "- | - | - | - | -" // the samples saw none of its processes
		if r.Seen > 0 {
			perProcess = fmt.Sprintf("%.0f | %.1f | %.0f | %.0f | %.0f", r.Threads.Max, r.RSSMiB.Mean, r.FDs.Mean, r.Conns.Mean, r.BeatsPerSec)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Procs, per, ref, ratio, goAlone, perProcess, start, done)
	}
	return b.String()
}
