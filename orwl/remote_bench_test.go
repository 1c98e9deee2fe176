package orwl_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// Benchmarks across two processes on loopback. This process is rank 0 and runs task 0; a
// child process of this test binary is rank 1 and runs task 1. Each remote benchmark is
// compared in the same run with raw TCP between the same two processes.

func init() {
	scenarios["bench-peer"] = benchPeerScenario
	scenarios["tcp-peer"] = tcpPeerScenario
}

// benchJob describes one remote benchmark job to both processes.
type benchJob struct {
	size  int    // bytes of the location
	iters int    // sections of each task
	flow  string // "push": task 1 writes its location, task 0 reads it; "handoff": task 0 writes its own, task 1 reads it
}

func (b benchJob) env() []string {
	return []string{"BENCH_SIZE=" + strconv.Itoa(b.size), "BENCH_ITERS=" + strconv.Itoa(b.iters), "BENCH_FLOW=" + b.flow}
}

func benchJobFromEnv() benchJob {
	size, _ := strconv.Atoi(os.Getenv("BENCH_SIZE"))
	iters, _ := strconv.Atoi(os.Getenv("BENCH_ITERS"))
	return benchJob{size: size, iters: iters, flow: os.Getenv("BENCH_FLOW")}
}

// task is the program of both tasks of a remote benchmark job.
func (bj benchJob) task(ctx context.Context, t *orwl.Task, started func()) error {
	owner := 1 // push: task 1 owns and writes, task 0 reads remotely
	if bj.flow == "handoff" {
		owner = 0
	}
	if t.ID() == owner {
		t.Scale("x", bj.size)
	}
	x := t.Loc(owner, "x")
	insert, pos := t.ReadInsert, 1
	if t.ID() == owner {
		insert, pos = t.WriteInsert, 0
	}
	h := insert(x, pos)
	if err := t.Schedule(ctx); err != nil {
		return err
	}
	if started != nil {
		started()
	}
	for i := range bj.iters {
		if err := h.Section(ctx, func(b []byte) error {
			if t.ID() == owner {
				binary.LittleEndian.PutUint64(b, uint64(i)) // the data changes: a grant must carry it
				return nil
			}
			if got := binary.LittleEndian.Uint64(b); got != uint64(i) {
				return fmt.Errorf("iteration %d: read %d", i, got)
			}
			var sum uint64
			for _, w := range orwl.Uint64s(b) { // all of it, as a program would
				sum += w
			}
			benchSink = sum
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// benchSink keeps the reader's sum of the data alive.
var benchSink uint64

func benchPeerScenario() int {
	bj := benchJobFromEnv()
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error { return bj.task(ctx, t, nil) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startPeer starts the child process of a benchmark with the given extra environment.
func startPeer(b *testing.B, scenario string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Unchecked like this process, which runs benchmarks (Config.Checked).
	cmd.Env = append(append(os.Environ(), env...), scenarioEnv+"="+scenario, "ORWL_CHECKED=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd
}

// runRemote runs bj with this process as rank 0, timing the sections of task 0. The two
// processes share this machine's cores, as under orwlrun: GOMAXPROCS is half the cores in
// each.
func runRemote(b *testing.B, bj benchJob) {
	coord := freeAddr(b)
	secret := "bench-secret"
	procs := max(1, runtime.NumCPU()/2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	peer := startPeer(b, "bench-peer", append(bj.env(), "GOMAXPROCS="+strconv.Itoa(procs),
		"ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD="+coord, "ORWL_SECRET="+secret)...)
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"},
		Job: &orwl.Job{Rank: 0, Size: 2, Coord: coord, Secret: []byte(secret)}},
		func(ctx context.Context, t *orwl.Task) error {
			return bj.task(ctx, t, func() { b.ReportAllocs(); b.ResetTimer() })
		})
	b.StopTimer()
	if werr := peer.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		b.Fatal(err)
	}
}

// tcpPeerScenario is the raw TCP side of the references: "push" streams BENCH_ITERS blocks
// of BENCH_SIZE bytes; "handoff" answers every BENCH_SIZE-byte message with one.
func tcpPeerScenario() int {
	bj := benchJobFromEnv()
	conn, err := net.Dial("tcp", os.Getenv("BENCH_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	buf := make([]byte, bj.size)
	for range bj.iters {
		if bj.flow == "handoff" {
			if _, err := io.ReadFull(conn, buf); err != nil {
				return 1
			}
		}
		if _, err := conn.Write(buf); err != nil {
			return 1
		}
	}
	return 0
}

// runTCP runs the raw TCP reference of bj with this process receiving.
func runTCP(b *testing.B, bj benchJob) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	peer := startPeer(b, "tcp-peer", append(bj.env(), "BENCH_ADDR="+ln.Addr().String())...)
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, bj.size)
	b.ReportAllocs()
	b.ResetTimer()
	for range bj.iters {
		if bj.flow == "handoff" {
			if _, err := conn.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := peer.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRemotePush: the owner rewrites an 8 MiB location every iteration and a task of
// the other process reads all of it: every grant makes 8 MiB new to the reader, which reads
// it in place (the processes share a host). SetBytes makes MB/s comparable with the raw TCP
// stream of the same blocks.
func BenchmarkRemotePush(b *testing.B) {
	const size = 8 << 20
	b.Run("orwl", func(b *testing.B) {
		b.SetBytes(size)
		runRemote(b, benchJob{size: size, iters: b.N, flow: "push"})
	})
	b.Run("tcp", func(b *testing.B) {
		b.SetBytes(size)
		runTCP(b, benchJob{size: size, iters: b.N, flow: "push"})
	})
}

// BenchmarkRemoteHandoff: an 8-byte location handed between a writer in this process and a
// reader in the other, in strict alternation: one round trip per iteration, like the TCP
// ping-pong.
func BenchmarkRemoteHandoff(b *testing.B) {
	b.Run("orwl", func(b *testing.B) { runRemote(b, benchJob{size: 8, iters: b.N, flow: "handoff"}) })
	b.Run("tcp", func(b *testing.B) { runTCP(b, benchJob{size: 8, iters: b.N, flow: "handoff"}) })
}

// BenchmarkRemoteReaderSteady: an iterative reader of an 8-byte location of the other
// process; allocs/op shows what one iteration allocates in the reading process (setup is
// spread over b.N).
func BenchmarkRemoteReaderSteady(b *testing.B) {
	runRemote(b, benchJob{size: 8, iters: b.N, flow: "push"})
}
