package orwl_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// Pairs (docs/design.md): a location of one iterative writer of its owner's process and one
// iterative reader of another process of the host alternates them through counters in
// shared memory, with neither message nor FIFO operation, until a request of another
// handle dissolves it. These scenarios run where the processes share a host, so the
// schedule makes pairs of their locations; each process logs the pairs it makes.

func init() {
	scenarios["pairs"] = pairsScenario
	scenarios["pairDissolve"] = pairDissolveScenario
	scenarios["pairGone"] = pairGoneScenario
	scenarios["pairDeadlock"] = pairDeadlockScenario
	scenarios["pairKill"] = pairKillScenario
}

// pairLogger logs the library's debug lines, "orwl: a pair" among them, on standard output.
func pairLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// countPairs returns how many pairs the job's processes made.
func countPairs(out string) int { return strings.Count(out, `msg="orwl: a pair"`) }

func put(b []byte, v uint64) { binary.LittleEndian.PutUint64(b[len(b)-8:], v) }
func get(b []byte) uint64    { return binary.LittleEndian.Uint64(b[len(b)-8:]) }

// pairsScenario: every task of a ring, a task a process, writes its location "w" at
// position 0 and reads its left neighbour's at position 1 (the writer first in each
// round), and reads its left neighbour's "r" at position 0 and writes its own at 1 (the
// reader first). Each reader checks every value it sees: round k of "w" shows the
// writer's k, round k of "r" the writer's k-1. Halfway, "w" grows past its first size
// (Resize), so that its data moves to another buffer.
func pairsScenario() int {
	const iters = 3000
	procs, _ := strconv.Atoi(os.Getenv("ORWL_SIZE"))
	err := orwl.Run(context.Background(), orwl.Config{Tasks: procs, Locations: []string{"w", "r"}, Logger: pairLogger()},
		func(ctx context.Context, t *orwl.Task) error {
			me, left := t.ID(), (t.ID()+procs-1)%procs
			t.Scale("w", 8)
			t.Scale("r", 8)
			w := t.WriteInsert(t.Loc(me, "w"), 0)
			wr := t.ReadInsert(t.Loc(left, "w"), 1)
			rr := t.ReadInsert(t.Loc(left, "r"), 0)
			rw := t.WriteInsert(t.Loc(me, "r"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for k := range iters {
				if err := w.Section(ctx, func(b []byte) error {
					if k == iters/2 {
						var err error
						if b, err = w.Resize(1 << 16); err != nil {
							return err
						}
					}
					put(b, uint64(k*10+me))
					return nil
				}); err != nil {
					return err
				}
				if err := rr.Section(ctx, func(b []byte) error {
					if want := uint64(max(k-1, 0) * 10); k > 0 && get(b) != want+uint64(left) || k == 0 && get(b) != 0 {
						return fmt.Errorf("round %d of task %d's r: read %d", k, left, get(b))
					}
					return nil
				}); err != nil {
					return err
				}
				if err := wr.Section(ctx, func(b []byte) error {
					size := 8
					if k >= iters/2 {
						size = 1 << 16
					}
					if len(b) != size || get(b) != uint64(k*10+left) {
						return fmt.Errorf("round %d of task %d's w: read %d bytes, %d", k, left, len(b), get(b))
					}
					return nil
				}); err != nil {
					return err
				}
				if err := rw.Section(ctx, func(b []byte) error { put(b, uint64(k*10+me)); return nil }); err != nil {
					return err
				}
			}
			return nil
		})
	fmt.Printf("done err=%v\n", err)
	return 0
}

func TestPairsAlternateTheirRounds(t *testing.T) {
	out, status := job(t, 3, "pairs")
	if status != 0 || strings.Count(out, "done err=<nil>") != 3 {
		t.Fatalf("status %d\n%s", status, out)
	}
	if n := countPairs(out); n != 6 {
		t.Errorf("%d pairs, want 6 (each process's w and r)\n%s", n, out)
	}
}

// pairDissolveScenario: task 0's "x" and "y" are pairs with task 1, which reads them (the
// writer first). At round 100 of "x", task 0 itself asks for a one-shot read of "x"
// (ReadRequest), after its write of round 100 and before that of 101: placed behind the
// requests of the writer's round 101 and the reader's 100 at least, the read sees round
// 101's value, which task 0 writes before it acquires the read. At round 100 of "y", task
// 1 asks for one, after its read of round 100, and takes it after its read of 101: placed
// behind the writer's 101 and the reader's 101, and maybe the writer's 102, it sees the
// value of round 101 or 102. Every round, before and after, must show the reader its
// writer's value, but for a one-shot write of task 1 on "y", asked for after round 200 and
// taken after 201, which round 202 may show instead.
func pairDissolveScenario() int {
	const iters = 300
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x", "y"}, Logger: pairLogger()},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("x", 8)
			t.Scale("y", 8)
			if t.ID() == 0 {
				wx := t.WriteInsert(t.Loc(0, "x"), 0)
				wy := t.WriteInsert(t.Loc(0, "y"), 0)
				if err := t.Schedule(ctx); err != nil {
					return err
				}
				var extra *orwl.Handle
				for k := range iters {
					if err := wx.Section(ctx, func(b []byte) error { put(b, uint64(k)); return nil }); err != nil {
						return err
					}
					if err := wy.Section(ctx, func(b []byte) error { put(b, uint64(k)); return nil }); err != nil {
						return err
					}
					if k == 101 {
						if err := extra.Section(ctx, func(b []byte) error {
							if get(b) != 101 {
								return fmt.Errorf("task 0's own read of x after round 100 saw %d, want 101", get(b))
							}
							return nil
						}); err != nil {
							return err
						}
					}
					if k == 100 {
						var err error
						if extra, err = t.ReadRequest(t.Loc(0, "x")); err != nil {
							return err
						}
					}
				}
				return nil
			}
			rx := t.ReadInsert(t.Loc(0, "x"), 1)
			ry := t.ReadInsert(t.Loc(0, "y"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			var one, write *orwl.Handle
			for k := range iters {
				if err := rx.Section(ctx, func(b []byte) error {
					if get(b) != uint64(k) {
						return fmt.Errorf("round %d of x: read %d", k, get(b))
					}
					return nil
				}); err != nil {
					return err
				}
				if err := ry.Section(ctx, func(b []byte) error {
					if v := get(b); v != uint64(k) && !(k == 202 && v == 1<<40) {
						return fmt.Errorf("round %d of y: read %d", k, v)
					}
					return nil
				}); err != nil {
					return err
				}
				var err error
				switch k {
				case 100:
					one, err = t.ReadRequest(t.Loc(0, "y"))
				case 101:
					err = one.Section(ctx, func(b []byte) error {
						if v := get(b); v != 101 && v != 102 {
							return fmt.Errorf("task 1's read of y asked for after round 100 saw %d, want 101 or 102", v)
						}
						return nil
					})
				case 200:
					write, err = t.WriteRequest(t.Loc(0, "y"))
				case 201:
					err = write.Section(ctx, func(b []byte) error { put(b, 1<<40); return nil })
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	fmt.Printf("done err=%v\n", err)
	return 0
}

func TestPairDissolvesForAnotherRequest(t *testing.T) {
	out, status := job(t, 2, "pairDissolve")
	if status != 0 || strings.Count(out, "done err=<nil>") != 2 {
		t.Fatalf("status %d\n%s", status, out)
	}
	if n := countPairs(out); n != 2 {
		t.Errorf("%d pairs, want 2 (x and y)\n%s", n, out)
	}
}

// pairGoneScenario: task 1 reads task 0's "x" (the writer first), and task 0 reads task
// 1's "y" (the reader first); task 0 returns after 100 rounds, task 1 after 200: from
// round 100 on, task 1 reads what task 0 last wrote, and writes rounds that nobody reads.
func pairGoneScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x", "y"}, Logger: pairLogger()},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("x", 8)
			t.Scale("y", 8)
			if t.ID() == 0 {
				wx := t.WriteInsert(t.Loc(0, "x"), 0)
				ry := t.ReadInsert(t.Loc(1, "y"), 0)
				if err := t.Schedule(ctx); err != nil {
					return err
				}
				for k := range 100 {
					if err := wx.Section(ctx, func(b []byte) error { put(b, uint64(k)); return nil }); err != nil {
						return err
					}
					if err := ry.Section(ctx, func([]byte) error { return nil }); err != nil {
						return err
					}
				}
				return nil
			}
			rx := t.ReadInsert(t.Loc(0, "x"), 1)
			wy := t.WriteInsert(t.Loc(1, "y"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for k := range 200 {
				if err := rx.Section(ctx, func(b []byte) error {
					if want := uint64(min(k, 99)); get(b) != want {
						return fmt.Errorf("round %d of x: read %d, want %d", k, get(b), want)
					}
					return nil
				}); err != nil {
					return err
				}
				if err := wy.Section(ctx, func(b []byte) error { put(b, uint64(k)); return nil }); err != nil {
					return err
				}
			}
			return nil
		})
	fmt.Printf("done err=%v\n", err)
	return 0
}

func TestPairOutlivesOneSide(t *testing.T) {
	out, status := job(t, 2, "pairGone")
	if status != 0 || strings.Count(out, "done err=<nil>") != 2 {
		t.Fatalf("status %d\n%s", status, out)
	}
	if n := countPairs(out); n != 2 {
		t.Errorf("%d pairs, want 2\n%s", n, out)
	}
}

// pairDeadlockScenario: each of two tasks writes its "block" (position 0), read by the
// other (position 1): two pairs; each takes its write, and inside it the read of the
// other's, which waits for the other's write to end: a cycle, which the deadlock watch
// must find through the pairs' counters.
func pairDeadlockScenario() int {
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"block"}, Logger: pairLogger()},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("block", 8)
			mine := t.WriteInsert(t.Loc(t.ID(), "block"), 0)
			theirs := t.ReadInsert(t.Loc(1-t.ID(), "block"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			return mine.Section(ctx, func([]byte) error {
				return theirs.Section(ctx, func([]byte) error { return nil })
			})
		})
	fmt.Printf("deadlock=%v err=%v\n", errors.Is(err, orwl.ErrDeadlock), err)
	return 0
}

func TestPairDeadlockIsReported(t *testing.T) {
	out, status := job(t, 2, "pairDeadlock")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, out)
	}
	if n := countPairs(out); n != 2 {
		t.Errorf("%d pairs, want 2\n%s", n, out)
	}
	outputHas(t, out,
		`[0] deadlock=true`, `[1] deadlock=true`,
		`task 0 waits to read task 1 "block" (position 1), held by task 1`,
		`task 1 waits to read task 0 "block" (position 1), held by task 0`)
}

// pairKillScenario: task 1 reads task 0's "x", task 0 reads task 1's "y", both pairs;
// ORWL_TEST_PAIR_KILL's rank kills itself at round 200. The other must fail naming it
// within the peer timeout, whether it waits as a pair's writer or as its reader.
func pairKillScenario() int {
	victim, _ := strconv.Atoi(os.Getenv("ORWL_TEST_PAIR_KILL"))
	rank, _ := strconv.Atoi(os.Getenv("ORWL_RANK"))
	var killed time.Time
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}, Logger: pairLogger()},
		func(ctx context.Context, t *orwl.Task) error {
			t.Scale("x", 8)
			w := t.WriteInsert(t.Loc(t.ID(), "x"), 0)
			r := t.ReadInsert(t.Loc(1-t.ID(), "x"), 1)
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			for k := 0; ; k++ {
				if k == 200 {
					killed = time.Now()
					if rank == victim {
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
					}
				}
				if err := w.Section(ctx, func(b []byte) error { put(b, uint64(k)); return nil }); err != nil {
					return err
				}
				if err := r.Section(ctx, func([]byte) error { return nil }); err != nil {
					return err
				}
			}
		})
	fmt.Printf("lost=%v after=%.1fs err=%v\n", errors.Is(err, orwl.ErrPeerLost), time.Since(killed).Seconds(), err)
	return 0
}

func TestPairFailsWhenItsPeerIsKilled(t *testing.T) {
	for victim := range 2 {
		t.Run("rank"+strconv.Itoa(victim), func(t *testing.T) {
			out, _ := job(t, 2, "pairKill", "ORWL_TEST_PAIR_KILL="+strconv.Itoa(victim), "ORWL_PEER_TIMEOUT=1s")
			other := 1 - victim
			m := regexp.MustCompile(`\[` + strconv.Itoa(other) + `\] lost=true after=([0-9.]+)s err=(.*)`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("rank %d did not fail with a lost peer:\n%s", other, out)
			}
			if !strings.Contains(m[2], "rank "+strconv.Itoa(victim)) {
				t.Errorf("rank %d's error names no rank %d: %s", other, victim, m[2])
			}
			if after, _ := strconv.ParseFloat(m[1], 64); after > 5 {
				t.Errorf("rank %d failed %.1fs after the kill, want within the peer timeout (1s) and a few heartbeats", other, after)
			}
		})
	}
}
