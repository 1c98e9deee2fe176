// Package parallel runs a loop over rows on several goroutines.
package parallel

import (
	"runtime"
	"sync"
)

// Rows runs f over [0, rows) cut into contiguous ranges of about equal length, one per
// goroutine, on up to GOMAXPROCS goroutines and at most rows/minRows of them (so that a
// small loop stays on the caller's goroutine), and returns when every range is done. f is
// called concurrently on disjoint ranges.
func Rows(rows, minRows int, f func(r0, r1 int)) {
	workers := min(runtime.GOMAXPROCS(0), rows/max(1, minRows))
	if workers <= 1 {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	per := (rows + workers - 1) / workers
	for r0 := 0; r0 < rows; r0 += per {
		wg.Go(func() { f(r0, min(r0+per, rows)) })
	}
	wg.Wait()
}
