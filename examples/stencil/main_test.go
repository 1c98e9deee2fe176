package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
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
		writePid()
		os.Args = append([]string{"stencil"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	status := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
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
	for _, args := range []string{"-n 5000 -tasks 5 -iters 40", "-n 40x30 -tasks 3x2 -iters 25", "-n 31x29 -tasks 4 -iters 20"} {
		sums := map[string]bool{}
		for _, procs := range []int{1, 2, 3} {
			status, out := launch(procs, args)
			m := regexp.MustCompile(`\[0\] result: .* checksum=([0-9a-f]+) identical-to-sequential=true`).FindStringSubmatch(out)
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

// TestFailedCheckExitsNonZero: a result that differs from the reference is reported and
// fails the program.
func TestFailedCheckExitsNonZero(t *testing.T) {
	for _, procs := range []int{1, 2} {
		status, out := launch(procs, "-n 20x10 -tasks 2x1 -iters 5", brokenEnv+"=1")
		if status != 1 || !strings.Contains(out, "identical-to-sequential=false") {
			t.Fatalf("%d processes: status %d, want 1\n%s", procs, status, out)
		}
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range []string{"-n 0", "-n 10x", "-n 10 -tasks 2x1", "-n 4 -tasks 5", "-iters -1", "-n 10 extra"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%s: %v, want exit status 2 and one line\n%s", args, err, out)
		}
	}
}

func TestSquarest(t *testing.T) {
	for _, c := range []struct{ tasks, nx, ny, px, py int }{
		{4, 100, 100, 2, 2}, {2, 100, 100, 1, 2}, {2, 200, 100, 2, 1}, {6, 300, 200, 3, 2}, {7, 10, 10, 1, 7},
	} {
		if px, py := squarest(c.tasks, c.nx, c.ny); px != c.px || py != c.py {
			t.Errorf("squarest(%d, %d, %d) = %dx%d, want %dx%d", c.tasks, c.nx, c.ny, px, py, c.px, c.py)
		}
	}
}

func Example() {
	p, err := params("6x2", "3x1", 2)
	fmt.Println(p, err)
	// Output: {2 6 2 3 1 2} <nil>
}
