package main

import (
	"context"
	"fmt"
	"testing"
)

func TestRingIsSequential(t *testing.T) {
	for _, tasks := range []int{1, 2, 3, 8} {
		got, err := ring(context.Background(), tasks, 50, 40)
		if err != nil {
			t.Fatal(err)
		}
		if want := sequential(tasks, 50, 40); !equal(got, want) {
			t.Fatalf("%d tasks: bounds %v, sequential %v", tasks, got, want)
		}
	}
}

func Example_ring() {
	bounds, err := ring(context.Background(), 4, 3, 2)
	fmt.Println(bounds, err)
	// Output: [5.5 5.5 7.5 9.5] <nil>
}
