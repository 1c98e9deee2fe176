// Command floor is the 1-D stencil of examples/stencil in Go without ORWL: what a Go
// process costs when processes of one host exchange their edges, the floor under ORWL's
// figures in lab/bench scale. It starts -np copies of itself, each owning a block of the
// line, which exchange their edge cells through one cache line per direction and
// neighbour in a shared file (a sequence number, the value and the receiver's
// acknowledgement: Open MPI's fastbox, reduced to one value), polling it and yielding the
// core between looks (sched_yield), as Open MPI's processes do when they outnumber the
// cores. Nothing orders or locks the cells but the sequence numbers; a process that fails
// ends the job.
//
// It prints examples/stencil's result line: the time of one iteration (the slowest
// process's, the first tenth of the iterations left out) and the checksum of the cells,
// which equals the sequential sweep's (package jacobi's kernel, initial and boundary
// values):
//
//	go run ./lab/bench/floor -np 4 -n 4000 -iters 1000
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

// The variables that tell a process of the job from the one that starts it.
const (
	envFile = "ORWL_FLOOR_FILE" // the shared file
	envRank = "ORWL_FLOOR_RANK" // the process's rank
)

// box carries one edge cell from a process to a neighbour, one iteration at a time, in one
// cache line of the shared file.
type box struct {
	seq atomic.Uint64 // the iterations sent: the value is the edge of iteration seq-1
	ack atomic.Uint64 // the iterations received
	val float64
	_   [64 - 24]byte
}

// job is the shared file's layout: for each process its two boxes (toward the west and
// the east), then each process's time and, at the end, the cells.
type job struct {
	procs, cells, iters int
	mem                 []byte
}

func (j job) box(rank int, east bool) *box {
	i := 2 * rank
	if east {
		i++
	}
	return (*box)(unsafe.Pointer(&j.mem[i*64]))
}

func (j job) seconds(rank int) *float64 {
	return (*float64)(unsafe.Pointer(&j.mem[(2*j.procs+rank)*64]))
}

func (j job) result() []float64 {
	off := 3 * j.procs * 64
	return unsafe.Slice((*float64)(unsafe.Pointer(&j.mem[off])), j.cells)
}

func (j job) size() int { return 3*j.procs*64 + 8*j.cells }

// block returns the cells [x0, x1) of rank's block.
func (j job) block(rank int) (x0, x1 int) {
	return rank * j.cells / j.procs, (rank + 1) * j.cells / j.procs
}

func main() {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	np := fs.Int("np", 2, "processes")
	n := fs.Int("n", 4000, "cells of the line")
	iters := fs.Int("iters", 1000, "iterations")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *np < 1 || *n < 2**np || *iters < 1 || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "floor: want -np ≥ 1, -n ≥ 2 cells per process, -iters ≥ 1, no arguments")
		os.Exit(2)
	}
	j := job{procs: *np, cells: *n, iters: *iters}
	var err error
	if rank := os.Getenv(envRank); rank != "" {
		err = j.process(rank)
	} else {
		err = j.launch()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// launch makes the shared file, runs the processes and reports.
func (j job) launch() error {
	f, err := os.CreateTemp(shmDir(), "orwl-floor-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = f.Truncate(int64(j.size()))
	f.Close()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := j.run(f.Name()); err != nil {
		return err
	}
	if j.mem, err = mapFile(f.Name(), j.size()); err != nil {
		return err
	}
	slowest := 0.0
	for r := range j.procs {
		slowest = max(slowest, *j.seconds(r))
	}
	per := time.Duration(slowest / float64(j.iters-j.iters/10) * 1e9)
	fmt.Printf("result: dim=1 n=%dx1 iters=%d per-iteration=%v checksum=%016x tasks=%d procs=%d seconds=%.3f\n",
		j.cells, j.iters, per, jacobi.Checksum(j.result()), j.procs, j.procs, time.Since(start).Seconds())
	return nil
}

// run starts the processes and waits for them; when one fails, it kills the others.
func (j job) run(file string) error {
	cmds := make([]*exec.Cmd, j.procs)
	for r := range cmds {
		c := exec.Command(os.Args[0], os.Args[1:]...)
		c.Env = append(os.Environ(), envFile+"="+file, envRank+"="+strconv.Itoa(r))
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // none outlives the job
		if err := c.Start(); err != nil {
			killAll(cmds[:r])
			return err
		}
		cmds[r] = c
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for r, c := range cmds {
		wg.Go(func() {
			if err := c.Wait(); err != nil {
				once.Do(func() {
					first = fmt.Errorf("process %d: %v", r, err)
					killAll(cmds)
				})
			}
		})
	}
	wg.Wait()
	return first
}

func killAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		c.Process.Kill() // one that has ended already says so, which changes nothing
	}
}

// process runs the block of rank: its edges out, the cells that need no neighbour, the
// neighbours' edges in, its two border cells; then its cells into the result.
func (j job) process(rank string) error {
	me, err := strconv.Atoi(rank)
	if err != nil || me < 0 || me >= j.procs {
		return fmt.Errorf("%s=%q: not a rank of %d processes", envRank, rank, j.procs)
	}
	if j.mem, err = mapFile(os.Getenv(envFile), j.size()); err != nil {
		return err
	}
	x0, x1 := j.block(me)
	cols := x1 - x0
	u, v := make([]float64, cols+2), make([]float64, cols+2) // with a ghost cell each side
	for c := range cols {
		u[1+c] = jacobi.Initial(x0+c, 0)
	}
	u[0], u[cols+1] = jacobi.WestBoundary, jacobi.EastBoundary
	copy(v, u)
	var in []*box // the neighbours' boxes toward this process, and the ghost each fills
	var ghost []int
	if me > 0 {
		in, ghost = append(in, j.box(me-1, true)), append(ghost, 0)
	}
	if me < j.procs-1 {
		in, ghost = append(in, j.box(me+1, false)), append(ghost, cols+1)
	}
	warm := j.iters / 10
	t0 := time.Now()
	for k := range j.iters {
		if k == warm {
			t0 = time.Now()
		}
		seq := uint64(k + 1)
		if me > 0 {
			send(j.box(me, false), u[1], seq)
		}
		if me < j.procs-1 {
			send(j.box(me, true), u[cols], seq)
		}
		jacobi.Line3(v[2:cols], u[1:cols+1]) // the cells 1..cols-2 of the block
		receive(in, ghost, u, seq)
		jacobi.Line3(v[1:2], u[0:3]) // the border cells, with the ghosts
		jacobi.Line3(v[cols:cols+1], u[cols-1:cols+2])
		u, v = v, u
	}
	*j.seconds(me) = time.Since(t0).Seconds()
	copy(j.result()[x0:x1], u[1:cols+1])
	return nil
}

// send puts the edge x of iteration seq-1 into b once the neighbour has taken the last.
func send(b *box, x float64, seq uint64) {
	for b.ack.Load() != seq-1 {
		yieldCore()
	}
	b.val = x
	b.seq.Store(seq)
}

// receive takes the edges of iteration seq-1 from the boxes in into u's ghost cells; a
// neighbour may send the next as soon as it has the acknowledgement.
func receive(in []*box, ghost []int, u []float64, seq uint64) {
	var got [2]bool
	for left := len(in); left > 0; {
		for i, b := range in {
			if !got[i] && b.seq.Load() == seq {
				u[ghost[i]] = b.val
				b.ack.Store(seq)
				got[i] = true
				left--
			}
		}
		if left > 0 {
			yieldCore()
		}
	}
}

func yieldCore() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// shmDir is where the shared file goes: /dev/shm, which no disk backs, when there is one.
func shmDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func mapFile(path string, size int) ([]byte, error) {
	if path == "" {
		return nil, errors.New(envFile + " is not set")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}
