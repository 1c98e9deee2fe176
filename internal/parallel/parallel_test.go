package parallel

import (
	"runtime"
	"sync"
	"testing"
)

// Every row is visited once, in at most rows/minRows ranges (one for a loop too short to
// split), on at most GOMAXPROCS goroutines.
func TestRows(t *testing.T) {
	for _, c := range []struct{ rows, minRows int }{{0, 1}, {1, 1}, {7, 1}, {100, 30}, {100, 1}, {1000, 0}, {5, 10}} {
		var mu sync.Mutex
		seen := make([]int, c.rows)
		calls := 0
		Rows(c.rows, c.minRows, func(r0, r1 int) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			for r := r0; r < r1; r++ {
				seen[r]++
			}
		})
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("rows %d, min %d: row %d visited %d times", c.rows, c.minRows, r, n)
			}
		}
		if calls > max(1, min(runtime.GOMAXPROCS(0), c.rows/max(1, c.minRows))) {
			t.Fatalf("rows %d, min %d: %d ranges for GOMAXPROCS %d", c.rows, c.minRows, calls, runtime.GOMAXPROCS(0))
		}
	}
}
