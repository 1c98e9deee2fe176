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

	"github.com/orwl-go/orwl/orwl"
)

func TestJacobiIsBitIdentical(t *testing.T) {
	const n, iters = 257, 60
	want := sequential(n, iters)
	for _, tasks := range []int{1, 2, 3, 5, 8} {
		for run := range 3 {
			got, err := jacobi(context.Background(), n, tasks, iters)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d tasks, run %d: result differs from the sequential sweep", tasks, run)
			}
		}
	}
}

func Example_jacobi() {
	cells, err := jacobi(context.Background(), 6, 3, 2)
	fmt.Printf("%.4f %v\n", cells, err)
	// Output: [0.5556 0.3889 0.5000 0.6111 0.4444 -0.1389] <nil>
}

// childEnv makes a process of this test binary run main with the arguments it holds.
const childEnv = "STENCIL_TEST_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Args = append([]string{"stencil"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcessesGiveIdenticalResults runs the program as 1, 2 and 3 processes: every run
// prints the same checksum and matches the sequential sweep.
func TestProcessesGiveIdenticalResults(t *testing.T) {
	sums := map[string]bool{}
	for _, procs := range []int{1, 2, 3} {
		var out bytes.Buffer
		status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{childEnv + "=-n 5000 -tasks 5 -iters 40"}, Stdout: &out, Stderr: &out}.Run()
		m := regexp.MustCompile(`\[0\] result: .* checksum=([0-9a-f]+) identical-to-sequential=true`).FindStringSubmatch(out.String())
		if status != 0 || m == nil {
			t.Fatalf("%d processes: status %d\n%s", procs, status, out.String())
		}
		sums[m[1]] = true
	}
	if len(sums) != 1 {
		t.Fatalf("checksums differ across process counts: %v", sums)
	}
}
