package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// grant: a large location granted again and again to a task of another process, against a
// raw TCP stream of the same bytes between two processes, in one run; and the memory each
// ORWL process takes beyond its location while it streams. Two processes on this machine:
// task 1 owns the location and rewrites it every iteration, task 0 reads all of it, as a
// program would. Rows: "shm" (the processes share memory, as on one host: the reader reads
// the owner's data in place, and a grant carries only its name), "socket" (ORWL_SHM=off:
// every grant carries the data whole through the loopback websocket, as between hosts),
// "tcp" (the reference, which receives the bytes once). MB/s is the best of -rounds interleaved rounds of -iters grants, the first
// grant not counted. Peak extra memory is the growth of each process's resident set (Linux
// VmHWM, reset once the location and its copy are in memory) while it streams.

func init() {
	register(command{
		name:     "grant",
		summary:  "remote grants of a large location against a raw TCP stream, and the memory streaming takes",
		files:    tableFiles("grant"),
		children: []child{jsonChild(grantChildEnv, grantChild), jsonChild(grantTCPEnv, grantTCPSender)},
		setup:    benchGrant,
	})
}

// Environment variables of the processes of a grant run.
const (
	grantChildEnv = "ORWL_BENCH_GRANT_CHILD" // an ORWL process: its grantSpec in JSON
	grantTCPEnv   = "ORWL_BENCH_GRANT_TCP"   // the sending end of the TCP reference: its grantSpec in JSON
)

// grantSpec is what the processes of one measurement need.
type grantSpec struct {
	Size  int    `json:"size"`
	Iters int    `json:"iters"`
	Addr  string `json:"addr,omitempty"` // the TCP reference's receiver
}

// grantReport is what a process of an ORWL row prints, as one JSON line.
type grantReport struct {
	Rank      int     `json:"rank"`
	MBPerS    float64 `json:"mb_per_s,omitempty"` // the reader only
	ExtraPeak int64   `json:"extra_peak_bytes"`   // -1 where the system cannot tell
	Sum       uint64  `json:"sum"`                // of the words the reader read, which it reads all
}

// grantRow is one row of the table.
type grantRow struct {
	Method      string  `json:"method"`
	Size        int     `json:"size"`
	MBPerS      float64 `json:"mb_per_s"`
	VsTCP       float64 `json:"vs_tcp"`
	ReaderExtra int64   `json:"reader_extra_peak_bytes"`
	OwnerExtra  int64   `json:"owner_extra_peak_bytes"`
}

func benchGrant(fs *flag.FlagSet) func(rep *report) error {
	size := fs.Int("size", 256<<20, "bytes of the location")
	iters := fs.Int("iters", 8, "grants per measurement, after the first")
	rounds := fs.Int("rounds", 3, "interleaved rounds; each row's best is reported")
	return func(rep *report) error {
		if *size < 16 || *iters < 1 || *rounds < 1 {
			return badFlags("-size must be at least 16 bytes, -iters and -rounds at least 1")
		}
		spec := grantSpec{Size: *size, Iters: *iters}
		rows := []grantRow{{Method: "shm", Size: *size}, {Method: "socket", Size: *size}, {Method: "tcp", Size: *size}}
		for round := range *rounds {
			for i := range rows {
				r := &rows[i]
				var mbps float64
				var reader, owner int64
				var err error
				if r.Method == "tcp" {
					mbps, err = grantTCP(spec)
				} else {
					mbps, reader, owner, err = grantORWL(spec, r.Method == "socket")
				}
				if err != nil {
					return fmt.Errorf("%s: %w", r.Method, err)
				}
				fmt.Fprintf(os.Stderr, "grant: round %d, %s: %.0f MB/s\n", round+1, r.Method, mbps)
				if mbps > r.MBPerS {
					r.MBPerS = mbps
				}
				r.ReaderExtra, r.OwnerExtra = max(r.ReaderExtra, reader), max(r.OwnerExtra, owner)
			}
		}
		for i := range rows {
			rows[i].VsTCP = rows[i].MBPerS / rows[2].MBPerS
		}
		rep.header("2 processes on %d cores, %s location, %d grants, best of %d rounds",
			runtime.NumCPU(), formatMiB(int64(*size)), *iters, *rounds)
		rep.line("%-7s %10s %8s %18s %18s\n", "method", "MB/s", "vs-tcp", "reader-extra-peak", "owner-extra-peak")
		for _, r := range rows {
			if r.Method == "tcp" {
				rep.line("%-7s %10.0f %8.2f %18s %18s\n", r.Method, r.MBPerS, r.VsTCP, "", "")
			} else {
				rep.line("%-7s %10.0f %8.2f %18s %18s\n", r.Method, r.MBPerS, r.VsTCP, formatMiB(r.ReaderExtra), formatMiB(r.OwnerExtra))
			}
			rep.row(r)
		}
		return rep.write(rows)
	}
}

// formatMiB prints a byte count in MiB; a negative one is unknown.
func formatMiB(b int64) string {
	if b < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// grantORWL runs one ORWL measurement over two processes and returns the reader's MB/s and
// each process's peak extra memory.
func grantORWL(spec grantSpec, socket bool) (mbps float64, reader, owner int64, err error) {
	js, _ := json.Marshal(spec)
	env := []string{grantChildEnv + "=" + string(js)}
	if socket {
		env = append(env, "ORWL_SHM=off")
	}
	lines, err := launchSelfLines(2, []string{"grant"}, env)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(lines) != 2 {
		return 0, 0, 0, fmt.Errorf("want a report from each of 2 processes, got %q", lines)
	}
	for _, line := range lines {
		var r grantReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return 0, 0, 0, err
		}
		if r.Rank == 0 {
			mbps, reader = r.MBPerS, r.ExtraPeak
		} else {
			owner = r.ExtraPeak
		}
	}
	return mbps, reader, owner, nil
}

// grantChild is one process of an ORWL measurement: task 1 owns the location and stamps
// every iteration at both ends, task 0 checks the stamps and reads all of it.
func grantChild(spec grantSpec) error {
	rep := grantReport{ExtraPeak: -1}
	var baseline int64
	mark := func() { baseline = resetPeakRSS() }
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 2, Locations: []string{"x"}},
		func(ctx context.Context, t *orwl.Task) error {
			rep.Rank = t.ProcOf(t.ID())
			const owner = 1
			x := t.Loc(owner, "x")
			var h *orwl.Handle
			if t.ID() == owner {
				t.Scale("x", spec.Size)
				h = t.WriteInsert(x, 0)
			} else {
				h = t.ReadInsert(x, 1)
			}
			if err := t.Schedule(ctx); err != nil {
				return err
			}
			var start time.Time
			for i := range spec.Iters + 1 {
				if err := h.Section(ctx, func(b []byte) error {
					if len(b) != spec.Size {
						return fmt.Errorf("iteration %d: %d bytes, want %d", i, len(b), spec.Size)
					}
					first, last := b[:8], b[len(b)-8:]
					if t.ID() == owner {
						if i == 1 {
							mark() // the first grant has gone: its buffers are in use
						}
						binary.LittleEndian.PutUint64(first, uint64(i))
						binary.LittleEndian.PutUint64(last, uint64(i))
						return nil
					}
					if binary.LittleEndian.Uint64(first) != uint64(i) || binary.LittleEndian.Uint64(last) != uint64(i) {
						return fmt.Errorf("iteration %d: the data of an older iteration", i)
					}
					for _, w := range orwl.Uint64s(b) { // all of it, as a program would
						rep.Sum += w
					}
					return nil
				}); err != nil {
					return err
				}
				if t.ID() != owner && i == 0 {
					mark() // the copy is in memory
					start = time.Now()
				}
			}
			if t.ID() != owner {
				rep.MBPerS = float64(spec.Iters) * float64(spec.Size) / time.Since(start).Seconds() / 1e6
			}
			return nil
		})
	if err != nil {
		return err
	}
	if peak := peakRSS(); baseline > 0 && peak > 0 {
		rep.ExtraPeak = max(0, peak-baseline)
	}
	line, _ := json.Marshal(rep)
	fmt.Println(string(line))
	return nil
}

// resetPeakRSS makes the process's peak resident set its current one (Linux
// /proc/self/clear_refs) and returns that size, or -1 where it cannot.
func resetPeakRSS() int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return -1
	}
	return procStatus("VmRSS:")
}

// peakRSS returns the process's peak resident set since the last reset, or -1.
func peakRSS() int64 { return procStatus("VmHWM:") }

// procStatus returns a size field of /proc/self/status in bytes, or -1.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// grantTCP streams spec.Iters+1 blocks of spec.Size bytes from a child process to this one
// over a raw TCP connection on loopback and returns the MB/s of the last spec.Iters, each
// process with as many threads as an ORWL process of the same run.
func grantTCP(spec grantSpec) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	spec.Addr = ln.Addr().String()
	js, _ := json.Marshal(spec)
	procs := max(1, runtime.NumCPU()/2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	cmd := exec.Command(exe, "grant")
	var errs bytes.Buffer
	cmd.Env = append(os.Environ(), grantTCPEnv+"="+string(js), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		cmd.Process.Kill()
		return 0, fmt.Errorf("the sender did not connect: %w %s", err, errs.String())
	}
	defer conn.Close()
	buf := make([]byte, spec.Size)
	var start time.Time
	for i := range spec.Iters + 1 {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0, err
		}
		if i == 0 {
			start = time.Now()
		}
	}
	return float64(spec.Iters) * float64(spec.Size) / time.Since(start).Seconds() / 1e6, nil
}

// grantTCPSender is the sending end of the TCP reference.
func grantTCPSender(spec grantSpec) error {
	conn, err := net.Dial("tcp", spec.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, spec.Size)
	for range spec.Iters + 1 {
		if _, err := conn.Write(buf); err != nil {
			return errors.Join(errors.New("sending the TCP reference"), err)
		}
	}
	return nil
}
