package orwl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// TestEveryProcessGetsTheFailure: a task of rank 1 fails while a task of rank 0 keeps
// requesting rank 1's location; rank 0's Run must return rank 1's reason, not only that
// rank 1 closed its mesh (its report of why comes on one connection, its goodbye on the
// other may be read first).
func TestEveryProcessGetsTheFailure(t *testing.T) {
	errBoom := errors.New("boom in task 1")
	for run := range 40 {
		config := func(int) orwl.Config { return orwl.Config{Tasks: 2, Locations: []string{"v"}} }
		errs := runEachProc(t, context.Background(), 2, config, func(ctx context.Context, t *orwl.Task) error {
			t.Scale("v", 8)
			var h *orwl.Handle
			if t.ID() == 0 {
				h = t.ReadInsert(t.Loc(1, "v"), 1)
			} else {
				h = t.WriteInsert(t.Loc(1, "v"), 0)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for iter := 0; ; iter++ {
				if t.ID() == 0 && iter == 50 && run%2 == 1 {
					return nil // rank 0 waits at the end for the others
				}
				if t.ID() == 1 && iter == 50 {
					return errBoom
				}
				if err := h.Section(ctx, func([]byte) error { return nil }); err != nil {
					return err
				}
			}
		})
		for rank, err := range errs {
			if err == nil || !strings.Contains(err.Error(), errBoom.Error()) {
				t.Fatalf("run %d, rank %d: %v; want task 1's failure", run, rank, err)
			}
		}
	}
}
