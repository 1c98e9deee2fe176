package main

import (
	"context"
	"fmt"
	"testing"
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
			if !equal(got, want) {
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
