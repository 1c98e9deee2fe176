package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// config is a command line of the shared flags and one of its own.
type config struct {
	Job
	n int
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := &config{}
	c.Flags(fs, Layout{Tasks: 2, TasksDoc: "two", MaxTasks: 8})
	fs.IntVar(&c.n, "n", 1, "a number")
	if err := Parse(fs, args, "usage: t [flags]", stderr); err != nil {
		return nil, err
	}
	if c.n < 1 {
		return nil, errors.New("-n must be\npositive")
	}
	return c, c.Resolve(0)
}

func TestRun(t *testing.T) {
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{[]string{"-n", "3"}, 0, "n=3 tasks=2 procs=1\n", ""},
		{[]string{"-n", "3", "-tasks", "5"}, 0, "n=3 tasks=5 procs=1\n", ""},
		{[]string{"-h"}, 0, "", "usage: t [flags]\n"},
		{[]string{"-n", "0"}, ExitUsage, "", "t: -n must be positive\n"},
		{[]string{"-m"}, ExitUsage, "", "t: flag provided but not defined: -m\n"},
		{[]string{"-n", "2", "extra"}, ExitUsage, "", "t: unexpected argument \"extra\"\n"},
		{[]string{"-tasks", "9"}, ExitUsage, "", "t: -tasks is 9; need 1 to 8\n"},
		{[]string{"-tasks", "2x2"}, ExitUsage, "", "t: invalid value \"2x2\" for flag -tasks: not a count of tasks (a grid of tasks is -grid PxQ)\n"},
		{[]string{"-np", "0"}, ExitUsage, "", "t: -np is 0; need 1 to 8\n"},
		{[]string{"-np", "3", "-tasks", "2"}, ExitUsage, "", "t: 3 processes for 2 tasks; need at most one process per task\n"},
	} {
		var out, errs bytes.Buffer
		status := Run("t", c.args, &out, &errs, parse, func(c *config, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "n=%d tasks=%d procs=%d\n", c.n, c.Tasks, c.Procs)
			return 0
		})
		stderr := errs.String()
		if c.args[0] == "-h" { // the usage, then the flags
			stderr, _, _ = strings.Cut(stderr, "  -")
			stderr = strings.TrimSuffix(stderr, "\n") + "\n"
		}
		if status != c.status || out.String() != c.stdout || stderr != c.stderr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q", c.args, status, out.String(), errs.String(), c.status, c.stdout, c.stderr)
		}
	}
}

// TestResolve: -tasks is a count; a grid, -np, a launcher and the layout's default give it
// in that order when it is not set, and the processes default to one or min(tasks, cores).
func TestResolve(t *testing.T) {
	resolve := func(l Layout, grid int, args ...string) (*Job, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		j := &Job{}
		j.Flags(fs, l)
		if err := Parse(fs, args, "", io.Discard); err != nil {
			return nil, err
		}
		return j, j.Resolve(grid)
	}
	for _, c := range []struct {
		l            Layout
		grid         int
		args         string
		tasks, procs int
	}{
		{Layout{Tasks: 4}, 0, "", 4, 1},
		{Layout{Tasks: 4}, 6, "", 6, 1},
		{Layout{Tasks: 4}, 0, "-np 3", 3, 3},
		{Layout{Tasks: 4}, 0, "-np 3 -tasks 7", 7, 3},
		{Layout{Tasks: 1, Spread: true}, 0, "-tasks 1", 1, 1},
		{Layout{Tasks: 4}, 6, "-tasks 6 -np 2", 6, 2},
	} {
		j, err := resolve(c.l, c.grid, strings.Fields(c.args)...)
		if err != nil || j.Tasks != c.tasks || j.Procs != c.procs || j.Start() != c.procs {
			t.Errorf("%+v grid %d %q: %+v, %v; want %d tasks, %d processes", c.l, c.grid, c.args, j, err, c.tasks, c.procs)
		}
	}
	if _, err := resolve(Layout{Tasks: 4}, 6, "-tasks", "4"); err == nil || err.Error() != "-grid has 6 tasks but -tasks is 4" {
		t.Errorf("-grid 6 tasks, -tasks 4: %v", err)
	}
	if (&Job{Procs: 3, InJob: true}).Start() != 1 {
		t.Error("Start under a launcher: want 1")
	}
}

// TestResult: the line and the JSON have the same keys in the same order, verified last,
// the details in JSON only; a failed check exits ExitMismatch.
func TestResult(t *testing.T) {
	var r Result
	r.Add("n", 64)
	r.Job(4, 2)
	r.First(1.23456, 98.76)
	r.Seconds(0.5)
	r.Detail("checksum", "00ff")
	for _, c := range []struct {
		verified       func()
		asJSON         bool
		status         int
		stdout, stderr string
	}{
		{func() {}, false, 0, "result: n=64 tasks=4 procs=2 first-seconds=1.235 first-gflops=98.8 seconds=0.500 verified=skipped\n", ""},
		{func() { r.Verified(true) }, false, 0, "result: n=64 tasks=4 procs=2 first-seconds=1.235 first-gflops=98.8 seconds=0.500 verified=true\n", ""},
		{func() { r.Verified(false) }, true, ExitMismatch,
			`{"n":64,"tasks":4,"procs":2,"first-seconds":1.23456,"first-gflops":98.76,"seconds":0.5,"checksum":"00ff","verified":false}` + "\n", "t: the result did not verify\n"},
	} {
		c.verified()
		var out, errs bytes.Buffer
		if status := r.Report(&out, &errs, "t", c.asJSON); status != c.status || out.String() != c.stdout || errs.String() != c.stderr {
			t.Errorf("status %d, stdout %q, stderr %q; want %d, %q, %q", status, out.String(), errs.String(), c.status, c.stdout, c.stderr)
		}
	}
}
