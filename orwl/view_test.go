package orwl_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

func init() { scenarios["view"] = viewScenario }

// viewSizes fixes the view scenario: the size of its location in each round (0-based),
// with a Resize to a new buffer in round 2 and one within it in round 4.
var viewSizes = []int{3 << 20, 3 << 20, 6 << 20, 6 << 20, 5 << 20, 5 << 20}

// viewScenario: task 0 (rank 0) owns a location of several MiB that it writes in every
// round, the round's number plus one in word 0 and a mark in the first byte of every page,
// resizing it now and then; task 1 (rank 1) reads it, checks it, then writes word 1, which
// task 0 checks in the next round. With VIEW_MISUSE set, task 1 writes through its read's data in
// round 1 and prints the error it gets.
func viewScenario() int {
	misuse := os.Getenv("VIEW_MISUSE") != ""
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"big"}}, func(ctx context.Context, t *orwl.Task) error {
		big := t.Loc(0, "big")
		if t.ID() == 0 {
			t.Scale("big", viewSizes[0])
			w := t.WriteInsert(big, 0)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			return t.Iterate(ctx, len(viewSizes), func(r int) error {
				return w.Section(ctx, func(b []byte) error {
					if r > 0 {
						if got := binary.LittleEndian.Uint64(b[8:]); got != uint64(1000*r) {
							return fmt.Errorf("round %d: word 1 is %d, want task 1's %d", r, got, 1000*r)
						}
					}
					if len(b) != viewSizes[r] {
						var err error
						if b, err = w.Resize(viewSizes[r]); err != nil {
							return err
						}
					}
					binary.LittleEndian.PutUint64(b, uint64(r+1))
					for k := 4096; k < len(b); k += 4096 {
						b[k] = byte(k>>12+r) | 1
					}
					return nil
				})
			})
		}
		rd, wr := t.ReadInsert(big, 1), t.WriteInsert(big, 2)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return t.Iterate(ctx, len(viewSizes), func(r int) error {
			err := rd.Section(ctx, func(b []byte) error {
				if len(b) != viewSizes[r] || binary.LittleEndian.Uint64(b) != uint64(r+1) {
					return fmt.Errorf("round %d: read %d bytes, word 0 %d; want %d bytes, %d", r, len(b), binary.LittleEndian.Uint64(b), viewSizes[r], r+1)
				}
				for k := 4096; k < len(b); k += 4096 {
					if b[k] != byte(k>>12+r)|1 {
						return fmt.Errorf("round %d: byte %d is %d, want %d", r, k, b[k], byte(k>>12+r)|1)
					}
				}
				if misuse && r == 1 {
					b[16] = 1
				}
				return nil
			})
			if errors.Is(err, orwl.ErrReadOnlyData) {
				fmt.Println("misuse:", strings.SplitN(err.Error(), "\n", 2)[0])
			}
			if err != nil {
				return err
			}
			return wr.Section(ctx, func(b []byte) error {
				binary.LittleEndian.PutUint64(b[8:], uint64(1000*(r+1)))
				return nil
			})
		})
	})
	if err != nil {
		fmt.Println("error:", strings.SplitN(err.Error(), "\n", 2)[0])
		return 1
	}
	fmt.Println("ok")
	return 0
}

// TestReadInPlaceOnOneHost: a location of several MiB read by a process of the same host
// is read in place, through a view of the owner's memory: every round sees the owner's
// data, after a Resize to a new buffer and one within it, and after the reader's own writes
// (which bring a copy); the same holds where the processes copy (ORWL_SHM=off). A write
// through the read's data faults in place, even in an unchecked job, which would change a
// copy unnoticed.
func TestReadInPlaceOnOneHost(t *testing.T) {
	for _, shm := range []string{"on", "off"} {
		out, status := job(t, 2, "view", "ORWL_SHM="+shm)
		if status != 0 || strings.Count(out, "ok") != 2 {
			t.Fatalf("ORWL_SHM=%s: status %d\n%s", shm, status, out)
		}
	}
	out, status := job(t, 2, "view", "ORWL_CHECKED=off", "VIEW_MISUSE=1")
	if status == 0 || !strings.Contains(out, "misuse: ") || !strings.Contains(out, "write through a read handle's data") {
		t.Fatalf("a write through a view: status %d\n%s", status, out)
	}
}
