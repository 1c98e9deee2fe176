package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/blockring"
	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/orwl"
)

func TestRingIsSequential(t *testing.T) {
	for _, tasks := range []int{1, 2, 3, 8} {
		got, err := ring(context.Background(), blockring.Job{Tasks: tasks, Size: 50, Iters: 40})
		if err != nil {
			t.Fatal(err)
		}
		if want := blockring.Sequential(tasks, 50, 40); !slices.Equal(got, want) {
			t.Fatalf("%d tasks: bounds %v, sequential %v", tasks, got, want)
		}
	}
}

func Example_ring() {
	bounds, err := ring(context.Background(), blockring.Job{Tasks: 4, Size: 3, Iters: 2})
	fmt.Println(bounds, err)
	// Output: [5.5 5.5 7.5 9.5] <nil>
}

// Environment of a child process of this test binary: the arguments of main, and whether its
// reference is wrong (to see the check fail).
const (
	childEnv  = "BLOCKBOUND_TEST_ARGS"
	brokenEnv = "BLOCKBOUND_TEST_BROKEN_REFERENCE"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		if os.Getenv(brokenEnv) != "" {
			reference = func(tasks, size, iters int) []float64 {
				bounds := blockring.Sequential(tasks, size, iters)
				bounds[0]++
				return bounds
			}
		}
		argv := strings.Fields(args)
		if args == "" { // started by the program itself (-np): its arguments are the program's
			argv = os.Args[1:]
		}
		os.Exit(run(argv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestProcessesGiveIdenticalResults runs the program as 1, 2 and 3 processes: every run
// prints the same bounds, equal to the sequential sweep's.
func TestProcessesGiveIdenticalResults(t *testing.T) {
	lines := map[string]bool{}
	for _, procs := range []int{1, 2, 3} {
		var out bytes.Buffer
		status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{childEnv + "=-tasks 5 -size 64 -iters 30"}, Stdout: &out, Stderr: &out}.Run()
		m := regexp.MustCompile(`\[0\] result: (size=.* tasks=5) procs=(\d+) seconds=[0-9.]+ verified=true\n`).FindStringSubmatch(out.String())
		if status != 0 || m == nil || m[2] != fmt.Sprint(procs) {
			t.Fatalf("%d processes: status %d\n%s", procs, status, out.String())
		}
		lines[m[1]] = true
	}
	if len(lines) != 1 {
		t.Fatalf("results differ across process counts: %v", lines)
	}
}

// TestFailedCheckExits3: bounds that differ from the reference are reported and fail the
// program with the examples' status of a failed verification.
func TestFailedCheckExits3(t *testing.T) {
	for _, procs := range []int{1, 2} {
		var out bytes.Buffer
		status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{childEnv + "=-tasks 2 -size 8 -iters 3", brokenEnv + "=1"}, Stdout: &out, Stderr: &out}.Run()
		if status != cli.ExitMismatch || !strings.Contains(out.String(), "verified=false") {
			t.Fatalf("%d processes: status %d, want %d\n%s", procs, status, cli.ExitMismatch, out.String())
		}
	}
}

// TestStartsItsProcesses: with -np and no launcher, the program starts its processes
// itself, and only the process of task 0 prints; -json prints the same keys.
func TestStartsItsProcesses(t *testing.T) {
	t.Setenv(childEnv, "") // the processes it starts are this test binary, running the program
	var out, errs bytes.Buffer
	if status := run([]string{"-np", "2", "-tasks", "3", "-size", "8", "-iters", "4", "-json"}, &out, &errs); status != 0 {
		t.Fatalf("status %d\n%s%s", status, out.String(), errs.String())
	}
	want := fmt.Sprintf(`{"size":8,"iters":4,"bounds":%s,"tasks":3,"procs":2,"seconds":`, strings.ReplaceAll(fmt.Sprint(blockring.Sequential(3, 8, 4)), " ", ","))
	if !strings.HasPrefix(out.String(), want) || !strings.HasSuffix(out.String(), `,"verified":true}`+"\n") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("want one line %s...\"verified\":true}, got:\n%s", want, out.String())
	}
}
