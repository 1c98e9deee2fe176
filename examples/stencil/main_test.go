package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/stencil/jacobi"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
	"github.com/orwl-go/orwl/orwl"
)

// Environment of a child process of this test binary: the arguments of main, and whether its
// reference is wrong (to see the check fail).
const (
	childEnv  = "STENCIL_TEST_ARGS"
	brokenEnv = "STENCIL_TEST_BROKEN_REFERENCE"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		if os.Getenv(brokenEnv) != "" {
			sequential = func(p jacobi.Params) []float64 {
				cells := jacobi.Sequential(p)
				cells[len(cells)-1]++
				return cells
			}
		}
		killjob.WritePid()
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	status := m.Run()
	killjob.Cleanup()
	os.Exit(status)
}

// launch runs main with args as procs processes of this test binary and returns the exit
// status and the output.
func launch(procs int, args string, env ...string) (int, string) {
	var out bytes.Buffer
	status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
		Env: append([]string{childEnv + "=" + args}, env...), Stdout: &out, Stderr: &out}.Run()
	return status, out.String()
}

// TestProcessesGiveIdenticalResults runs the line and the plane as 1, 2 and 3 processes:
// every run prints the same checksum and matches the sequential sweep.
func TestProcessesGiveIdenticalResults(t *testing.T) {
	for _, args := range []string{"-n 5000 -tasks 5 -iters 40", "-n 40x30 -grid 3x2 -iters 25", "-n 31x29 -tasks 4 -iters 20"} {
		sums := map[string]bool{}
		for _, procs := range []int{1, 2, 3} {
			status, out := launch(procs, args)
			m := regexp.MustCompile(`\[0\] result: .* checksum=([0-9a-f]+) tasks=\d+ procs=\d+ seconds=[0-9.]+ verified=true`).FindStringSubmatch(out)
			if status != 0 || m == nil {
				t.Fatalf("%s, %d processes: status %d\n%s", args, procs, status, out)
			}
			sums[m[1]] = true
		}
		if len(sums) != 1 {
			t.Fatalf("%s: checksums differ across process counts: %v", args, sums)
		}
	}
}

// TestFailedCheckExits3: a result that differs from the reference is reported and fails
// the program with the examples' status of a failed verification.
func TestFailedCheckExits3(t *testing.T) {
	for _, procs := range []int{1, 2} {
		status, out := launch(procs, "-n 20x10 -grid 2x1 -iters 5", brokenEnv+"=1")
		if status != cli.ExitMismatch || !strings.Contains(out, "verified=false") {
			t.Fatalf("%d processes: status %d, want %d\n%s", procs, status, cli.ExitMismatch, out)
		}
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range []string{"-n 0", "-n 10x", "-n 10 -grid 2x1", "-n 4 -tasks 5", "-n 10x10 -tasks 2x2", "-n 10x10 -grid 2x2 -tasks 3", "-np 0", "-iters -1", "-n 10 extra"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%s: %v, want exit status 2 and one line\n%s", args, err, out)
		}
	}
}

func Example_params() {
	p, err := params("6x2", grid.Grid{P: 3, Q: 1}, 3, 2)
	fmt.Println(p.Dim, p.NX, p.NY, p.PX, p.PY, p.Iters, err)
	// Output: 2 6 2 3 1 2 <nil>
}

// TestDefaultGrid: a plane without -grid is split over the grid of -tasks whose blocks are
// the most square; a line over all its tasks.
func TestDefaultGrid(t *testing.T) {
	for args, want := range map[string][2]int{"-n 300x200 -tasks 6": {3, 2}, "-n 100x100 -tasks 2": {1, 2}, "-n 1000 -tasks 4": {4, 1}} {
		c, err := parse(strings.Fields(args), io.Discard)
		if err != nil || c.p.PX != want[0] || c.p.PY != want[1] || c.Tasks != want[0]*want[1] {
			t.Errorf("%s: %+v, %v; want %dx%d tasks", args, c, err, want[0], want[1])
		}
	}
}
