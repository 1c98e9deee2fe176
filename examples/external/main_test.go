package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/blockring"
	"github.com/orwl-go/orwl/orwl"
)

// needPython skips t when python3 is not installed.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the example's step is a Python script")
	}
}

func TestRingIsSequential(t *testing.T) {
	needPython(t)
	for _, tasks := range []int{1, 2, 3} {
		got, err := ring(context.Background(), blockring.Job{Tasks: tasks, Size: 50, Iters: 4})
		if err != nil {
			t.Fatal(err)
		}
		if want := blockring.Sequential(tasks, 50, 4); !slices.Equal(got, want) {
			t.Fatalf("%d tasks: bounds %v, sequential %v", tasks, got, want)
		}
	}
}

// childEnv makes a process of this test binary run main with the arguments it holds.
const childEnv = "EXTERNAL_EXAMPLE_TEST_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// launch runs main with args as procs processes and returns the exit status and output.
// (GORACE: under the race detector a process that exits with status 0 would wait a second.)
func launch(procs int, args string) (int, string) {
	var out bytes.Buffer
	status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
		Env: []string{childEnv + "=" + args, "GORACE=atexit_sleep_ms=0"}, Stdout: &out, Stderr: &out}.Run()
	return status, out.String()
}

// TestProcessesPrintBlockboundsLine runs the program as 1, 2 and 3 processes: each prints
// the line examples/blockbound prints for the same flags, whose bounds are the sequential
// sweep's.
func TestProcessesPrintBlockboundsLine(t *testing.T) {
	needPython(t)
	bounds := blockring.Sequential(5, 64, 6)
	for _, procs := range []int{1, 2, 3} {
		status, out := launch(procs, "-tasks 5 -size 64 -iters 6")
		want := regexp.MustCompile(fmt.Sprintf(`\[0\] result: size=64 iters=6 bounds=%s tasks=5 procs=%d seconds=[0-9.]+ verified=true\n`, regexp.QuoteMeta(fmt.Sprint(bounds)), procs))
		if status != 0 || !want.MatchString(out) {
			t.Fatalf("%d processes: status %d, want the line %q\n%s", procs, status, want, out)
		}
	}
}

// TestMissingInterpreter: without its interpreter the program fails with a clear message.
func TestMissingInterpreter(t *testing.T) {
	status, out := launch(2, "-python /no/such/python3 -tasks 2 -iters 1")
	if status != 1 || !strings.Contains(out, `external: python interpreter "/no/such/python3" (see -python)`) {
		t.Fatalf("status %d, want 1 and a message naming the interpreter\n%s", status, out)
	}
}
