package orwl_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

func init() { scenarios["hugeread"] = hugeReadScenario }

// hugeReadScenario: task 0 owns a location of HUGE_MIB MiB that it writes once; task 1, in
// another process, reads it once and checks one word of every page.
func hugeReadScenario() int {
	mib, _ := strconv.Atoi(os.Getenv("HUGE_MIB"))
	size := mib << 20
	cfg := orwl.Config{Tasks: 2, Locations: []string{"data"}}
	if os.Getenv("HUGE_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		if t.ID() == 0 {
			t.Scale("data", size)
			w := t.WriteInsert(t.Loc(0, "data"), 0)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			return w.Section(ctx, func(b []byte) error {
				for k := 0; k < len(b); k += 4096 {
					b[k] = byte(k>>12) | 1
				}
				return nil
			})
		}
		r := t.ReadInsert(t.Loc(0, "data"), 1)
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		return r.Section(ctx, func(b []byte) error {
			if len(b) != size {
				return fmt.Errorf("read %d bytes, want %d", len(b), size)
			}
			var sum uint64
			for _, x := range orwl.Uint64s(b) { // read all of it, as a program would
				sum += x
			}
			for k := 0; k < len(b); k += 4096 {
				if b[k] != byte(k>>12)|1 {
					return fmt.Errorf("byte %d is %d, want %d (sum %d)", k, b[k], byte(k>>12)|1, sum)
				}
			}
			return nil
		})
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// TestHugeLocationThroughSharedMemory: a location of ORWL_TEST_HUGE_MIB MiB (2100 reproduces
// the size of the report: 2^31 bytes and more) written by task 0 and read once by task 1 in
// another process of the same host, through shared memory; every process succeeds. It
// needs about 3 times that memory and tens of seconds, so it runs only when asked. It runs
// under load, as the report did: each process has one scheduler (GOMAXPROCS 1, a process of
// two on a host of two cores, where filling the reader's mirror once stopped its
// heartbeats for longer than the peer timeout), and this process keeps a core busy.
func TestHugeLocationThroughSharedMemory(t *testing.T) {
	mib := os.Getenv("ORWL_TEST_HUGE_MIB")
	if mib == "" {
		t.Skip("set ORWL_TEST_HUGE_MIB=2100 to move a location of that many MiB between two processes")
	}
	busy := make(chan struct{})
	defer close(busy)
	go func() {
		for {
			select {
			case <-busy:
				return
			//lint:ignore SA5004 the loop spins on purpose: it keeps a core busy
			default:
			}
		}
	}()
	p := startScenario(t, "hugeread", 2, nil, func(int) []string { return []string{"HUGE_MIB=" + mib, "GOMAXPROCS=1"} })
	outs, codes := p.wait()
	expectExitZero(t, outs, codes)
}
