package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatParent(t *testing.T) {
	for _, c := range []struct {
		stat string
		ppid int
		ok   bool
	}{
		{"123 (stencil) S 45 123 45 0 -1", 45, true},
		{"7 (a) b) c) R 1 7 7 0", 1, true}, // a command with spaces and parentheses
		{"7 (broken", 0, false},
		{"7 (x) S", 0, false},
	} {
		if ppid, ok := statParent(c.stat); ppid != c.ppid || ok != c.ok {
			t.Errorf("statParent(%q) = %d, %v; want %d, %v", c.stat, ppid, ok, c.ppid, c.ok)
		}
	}
}

// TestDescendants: the children files and the parents in /proc/PID/stat find the same
// processes under a shell that runs two sleeps, and sampleJob samples those of a command.
func TestDescendants(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the shell and its sleeps
	var got []int
	for range 1000 { // until the shell has started its two sleeps
		if got = descendants(cmd.Process.Pid); len(got) == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	byParent := descendantsByParent(cmd.Process.Pid)
	slices.Sort(got)
	slices.Sort(byParent)
	if len(got) != 2 || !slices.Equal(got, byParent) {
		t.Fatalf("descendants %v, by parent %v; want the shell's two sleeps in both", got, byParent)
	}
	stop := make(chan struct{})
	close(stop) // one sample
	peaks, _ := sampleJob(cmd.Process.Pid, "sleep", time.Second, stop)
	if len(peaks) != 2 || peaks[got[0]].rss <= 0 || peaks[got[0]].threads != 1 || peaks[got[0]].fds < 1 {
		t.Fatalf("samples of two sleeps: %+v", peaks)
	}
}

func TestParseStatus(t *testing.T) {
	got := parseStatus("Name:\tstencil\nVmRSS:\t   14448 kB\nRssShmem:\t     528 kB\nThreads:\t69\nSigQ:\t0/1\n")
	if want := (procSample{rss: 14448 << 10, shmem: 528 << 10, threads: 69}); got != want {
		t.Fatalf("parseStatus = %+v, want %+v", got, want)
	}
}

func TestScaleVariants(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := scaleVariants("default; ORWL_SPIN=0 GOMAXPROCS=1 ;bin=" + bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].name != "orwl" || got[0].env != nil ||
		got[1].name != "orwl ORWL_SPIN=0 GOMAXPROCS=1" || strings.Join(got[1].env, ",") != "ORWL_SPIN=0,GOMAXPROCS=1" ||
		got[2].bin != bin || got[2].env != nil {
		t.Fatalf("variants: %+v", got)
	}
	for _, bad := range []string{"", ";", "SPIN", "=1", "bin=/no/such/file"} {
		if _, err := scaleVariants(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestHeartbeatPeriod(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, 300 * time.Millisecond},
		{[]string{"ORWL_PEER_TIMEOUT=30s"}, 500 * time.Millisecond},
		{[]string{"ORWL_PEER_TIMEOUT=1s"}, 100 * time.Millisecond},
		{[]string{"ORWL_PEER_TIMEOUT=bad"}, 300 * time.Millisecond},
	} {
		if got := heartbeatPeriod(c.env); got != c.want {
			t.Errorf("heartbeatPeriod(%q) = %v, want %v", c.env, got, c.want)
		}
	}
}

func TestParseResults(t *testing.T) {
	s, sum, err := parseORWLResult("[0] result: dim=1 n=8000x1 grid=8x1 iters=200 per-iteration=107.351µs checksum=d464b4d913a2a450 tasks=8\n")
	if err != nil || s != 107.351e-6 || sum != "d464b4d913a2a450" {
		t.Errorf("orwl: %v, %q, %v", s, sum, err)
	}
	s, sum, err = parseMPIResult("per-iteration=1.351162222e-05 checksum=d464b4d913a2a450\n")
	if err != nil || s != 1.351162222e-05 || sum != "d464b4d913a2a450" {
		t.Errorf("mpi: %v, %q, %v", s, sum, err)
	}
	if _, _, err := parseORWLResult("stencil: orwl: rank 3 lost\n"); err == nil {
		t.Error("no result line: no error")
	}
}

func TestFailure(t *testing.T) {
	out := "[0] stencil: rank 0: process rank 3 lost\n[3] 2026/11/28 23:15:39 WARN refused connection\n[3] stencil: rank 3: too many open files\n" +
		"[5] stencil: lost 3\norwlrun: rank 3 failed (exit status 1)\n"
	if got, want := failure(out), "[3] stencil: rank 3: too many open files | orwlrun: rank 3 failed (exit status 1)"; got != want {
		t.Errorf("failure = %q, want %q", got, want)
	}
	if got, want := failure("a\nb\n\nc\nd\n"), "b | c | d"; got != want {
		t.Errorf("without orwlrun's line: %q, want %q", got, want)
	}
}

// TestSummarize: a row counts the finished runs, keeps the first error, the best and median
// times of the timed runs (not of the sampled ones), the largest per-process figures over
// the runs, and the ratio to MPI's row.
func TestSummarize(t *testing.T) {
	j := scaleJob{procs: 2, contender: "orwl", iters: 100, beat: 300 * time.Millisecond}
	runs := []scaleRun{
		{finished: true, checked: true, sampled: true, seconds: 0.2, perIteration: 0.5e-3, peaks: map[int]procSample{1: {rss: 10 << 20, threads: 6, established: 2}, 2: {rss: 20 << 20, threads: 8, established: 4}}},
		{err: "no end within 1s (killed)", seconds: 1},
		{finished: true, checked: true, seconds: 1, perIteration: 2e-3},
		{finished: true, checked: true, sampled: true, seconds: 0.5, perIteration: 1e-3, peaks: map[int]procSample{1: {rss: 12 << 20, threads: 7, established: 2}}},
		{finished: true, checked: true, seconds: 0.5, perIteration: 1e-3},
	}
	row := summarize(j, runs)
	if row.Runs != 5 || row.Finished != 4 || !row.Checked || row.Error != "no end within 1s (killed)" {
		t.Fatalf("counts: %+v", row)
	}
	if row.PerIteration != (stat{Best: 1e-3, Median: 2e-3}) || row.Start.Best != 0.4 {
		t.Errorf("times: per iteration %+v, start %+v", row.PerIteration, row.Start)
	}
	if row.RSSMiB != (spread{Mean: 15, Max: 20}) || row.Threads != (spread{Mean: 7, Max: 8}) || row.Seen != 2 {
		t.Errorf("per process: RSS %+v, threads %+v, seen %d", row.RSSMiB, row.Threads, row.Seen)
	}
	if row.BeatsPerSec != 10 { // 3 connections on average, a beat each every 300ms
		t.Errorf("beats per second %v, want 10", row.BeatsPerSec)
	}
	rows := []scaleRow{row, {Contender: "mpi-vader", Finished: 1, PerIteration: stat{Best: 0.5e-3}}, {Contender: "orwl x"}}
	setRatios(rows)
	if rows[0].Ratio != 2 || rows[1].Ratio != 1 || rows[2].Ratio != 0 {
		t.Errorf("ratios %v %v %v", rows[0].Ratio, rows[1].Ratio, rows[2].Ratio)
	}
	if !strings.Contains(rows[2].line(), "0/0") {
		t.Errorf("a row without a finished run: %q", rows[2].line())
	}
}

// TestRunScale: a sampled run sees the job's processes, a timed one samples nothing; a job
// that fails or does not end in time is a run with its error, killed with its processes.
func TestRunScale(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	base := scaleJob{procs: 1, iters: 10, cells: 1, timeout: time.Minute, sample: 5 * time.Millisecond, program: "sleep",
		parse: func(string) (float64, string, error) { return 1e-3, "x", nil }}
	j := base
	j.argv = shell("sleep 0.2; echo done")
	if r := runScale(j); !r.finished || r.err != "" || !r.sampled || len(r.peaks) != 1 {
		t.Errorf("a sampled job that succeeds: %v (sampled %v, %d processes seen; want 1)", r, r.sampled, len(r.peaks))
	}
	j.sample = 0
	if r := runScale(j); !r.finished || r.sampled || r.peaks != nil {
		t.Errorf("a timed job: %v (sampled %v, %d processes seen; want none)", r, r.sampled, len(r.peaks))
	}
	j = base
	j.argv = shell("echo done")
	if r := runScale(j); !r.finished || r.err != "" {
		t.Errorf("a job that succeeds: %v", r)
	}
	j.argv = shell("echo broken; exit 3")
	if r := runScale(j); r.finished || !strings.Contains(r.err, "exit status 3: broken") {
		t.Errorf("a failed job: %v", r)
	}
	j = base
	j.timeout = 50 * time.Millisecond
	j.argv = shell("sleep 60; echo never")
	if r := runScale(j); r.finished || !strings.Contains(r.err, "no end within 50ms (killed)") {
		t.Errorf("a job past its time: %v", r)
	}
}

// shell is a job's command line: script run by sh, whatever the iterations.
func shell(script string) func(int) []string {
	return func(int) []string { return []string{"sh", "-c", script} }
}

// The sampled run lasts sampledPeriods sample periods at the timed runs' best time per
// iteration, and never has fewer iterations than the timed ones.
func TestSampledIters(t *testing.T) {
	j := scaleJob{iters: 1000, sample: 100 * time.Millisecond}
	timed := []scaleRun{{finished: true, perIteration: 20e-6}, {finished: true, perIteration: 10e-6}, {err: "failed"}}
	if got, want := sampledIters(j, timed), 100000; got != want { // 10 periods of 100ms at 10µs
		t.Errorf("a short job: %d iterations, want %d", got, want)
	}
	if got := sampledIters(j, []scaleRun{{finished: true, perIteration: 1}}); got != j.iters {
		t.Errorf("a long job: %d iterations, want its own %d", got, j.iters)
	}
	if got := sampledIters(j, []scaleRun{{err: "failed"}}); got != j.iters {
		t.Errorf("no finished timed run: %d iterations, want %d", got, j.iters)
	}
}

func TestScaleBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-procs", "0"}, {"-iters", "5"}, {"-variants", "X"}, {"-rounds", "0"}, {"extra"}} {
		if err := commands["scale"].run(args); !errors.As(err, new(usageError)) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

func TestScaleFigures(t *testing.T) {
	rows := []scaleRow{
		{Procs: 4, Contender: "orwl", Runs: 1, Finished: 1, PerIteration: stat{Best: 20e-6}, Start: stat{Best: 0.05}, Ratio: 2, Seen: 4,
			Threads: spread{Max: 6}, RSSMiB: spread{Mean: 9.5}, FDs: spread{Mean: 16}, Conns: spread{Mean: 6}, BeatsPerSec: 20},
		{Procs: 4, Contender: "orwl ORWL_SPIN=0", Runs: 1, Finished: 1},
		{Procs: 4, Contender: "go-floor", Runs: 1, Finished: 1, PerIteration: stat{Best: 9e-6}, Ratio: 0.9},
		{Procs: 4, Contender: "mpi-vader", Runs: 1, Finished: 1, PerIteration: stat{Best: 10e-6}, Start: stat{Best: 2.5}},
		{Procs: 128, Contender: "orwl", Runs: 1, Error: "exit status 1: a | b"},
		{Procs: 128, Contender: "go-floor", Runs: 1, Error: "killed"},
	}
	got := scaleFigures(rows)
	for _, want := range []string{
		"| 4 | 20µs | 10µs | 2.00x | 9µs (0.90x) | 6 | 9.5 | 16 | 6 | 20 | 0.05 (2.50) | 1 of 1 |",
		"| 128 | - | - | - | - | - | - | - | - | - | - | 0 of 1: exit status 1: a / b |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no row %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "SPIN") {
		t.Errorf("a variant in the figures:\n%s", got)
	}
}
