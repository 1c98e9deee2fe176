package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// footprint: how much memory one process touches while the stencil iterates, ORWL's against
// Open MPI's, in distinct 64-byte cache lines and 4 KiB pages: the working set that must fit
// in a core's caches, and its TLB, when many processes take turns on the core
// (docs/scaling.md); and how many instructions it runs per iteration, in the stencil's
// kernel and outside it (the library, the runtime, the program's own loop). examples/stencil
// runs under cmd/orwlrun and the C stencil under mpirun, -procs processes of -cells cells
// each, every process under valgrind's lackey tool, which writes every instruction, load and
// store it makes. From the trace of one process (the one whose trace is of median size: an
// interior rank), it counts the lines and pages touched in each window of -window iterations
// of the steady state (the first quarter and the last tenth of the run left out), data and
// code apart, and the instructions, and gives the median window; for ORWL, the functions
// whose instructions touched each data line first, and the functions that ran the most
// instructions, averaged over the windows (-top of each). Windows are cut at the entry of
// the stencil's kernel (jacobi.line3 in Go, sweep in C), entered the same number of times in
// every iteration. Under valgrind a process runs 50-100 times slower, which changes what else
// runs (the sockets' readers wake more often, the runtime's timers fire more often per
// iteration): compare builds with it (-bin), not the machine's caches.

func init() {
	register(command{
		name:    "footprint",
		summary: "cache lines and pages one process touches, and instructions it runs, per iteration of the stencil, ORWL beside Open MPI, under valgrind (lackey)",
		files:   tableFiles("footprint"),
		setup:   benchFootprint,
	})
}

// footprintRow is one contender's footprint: medians over the windows of a run.
type footprintRow struct {
	Contender  string          `json:"contender"`
	Procs      int             `json:"procs"`
	Cells      int             `json:"cells"`
	Window     int             `json:"window_iterations"`
	Windows    int             `json:"windows"`
	DataLines  int             `json:"data_lines"`
	CodeLines  int             `json:"code_lines"`
	DataPages  int             `json:"data_pages"`
	CodePages  int             `json:"code_pages"`
	Instrs     int             `json:"instructions_per_iteration"`
	Outside    int             `json:"outside_kernel_per_iteration"` // instructions outside the kernel's function
	FirstTouch []footprintFunc `json:"first_touch,omitempty"`
	TopInstrs  []footprintFunc `json:"instructions,omitempty"`
}

// footprintFunc is a function and what it did per window (FirstTouch: the data lines it
// touched first) or per iteration (TopInstrs: the instructions it ran).
type footprintFunc struct {
	Name  string  `json:"name"`
	Count float64 `json:"count"`
}

func benchFootprint(fs *flag.FlagSet) func(*report) error {
	procs := fs.Int("procs", 4, "processes of each job (one task each)")
	cells := fs.Int("cells", 1000, "cells of each task")
	iters := fs.Int("iters", 300, "iterations of each job")
	window := fs.Int("window", 16, "iterations of a window")
	top := fs.Int("top", 15, "functions of ORWL's first touches, and of its instructions, to list")
	bin := fs.String("bin", "", "a prebuilt examples/stencil (another commit's) instead of this checkout's")
	return func(rep *report) error {
		switch {
		case *procs < 2:
			return badFlags("-procs is %d; need at least 2", *procs)
		case *cells < 4 || *iters < 1 || *top < 0:
			return badFlags("-cells %d, -iters %d, -top %d: need at least 4 cells, 1 iteration, 0 functions", *cells, *iters, *top)
		case *window < 1 || *iters < 4**window:
			return badFlags("-window is %d and -iters %d; need a window of at least 1 iteration and at least 4 windows in the run", *window, *iters)
		}
		valgrind, err := exec.LookPath("valgrind")
		if err != nil {
			return errors.New("footprint needs valgrind (Debian: valgrind)")
		}
		dir, err := os.MkdirTemp("", "orwl-bench-footprint")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		pkgs := []string{"cmd/orwlrun", "examples/stencil"}
		if *bin != "" {
			pkgs = pkgs[:1]
		}
		bins, err := goBuild(dir, pkgs...)
		if err != nil {
			return err
		}
		orwlrun, stencil := bins[0], *bin
		if stencil == "" {
			stencil = bins[1]
		}
		lackey := func(prefix string) []string {
			return []string{valgrind, "--tool=lackey", "--trace-mem=yes", "--log-file=" + filepath.Join(dir, prefix+".%p")}
		}
		n := strconv.Itoa(*procs * *cells)
		rep.header("%s, %d cores; 1-D stencil, %d processes of %d cells, %d iterations, windows of %d iterations; median window",
			cpuModel(), runtime.NumCPU(), *procs, *cells, *iters, *window)
		rep.line("%-10s %8s %10s %10s %10s %10s %12s %14s\n", "contender", "windows", "data lines", "code lines", "data pages", "code pages", "instr/iter", "outside kernel")
		var rows []footprintRow
		add := func(r footprintRow) {
			rows = append(rows, r)
			rep.row(r)
			rep.line("%-10s %8d %10d %10d %10d %10d %12d %14d\n", r.Contender, r.Windows, r.DataLines, r.CodeLines, r.DataPages, r.CodePages, r.Instrs, r.Outside)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		args := append([]string{"-np", strconv.Itoa(*procs)}, lackey("orwl")...)
		cmd := exec.CommandContext(ctx, orwlrun, append(args, stencil, "-n", n, "-iters", strconv.Itoa(*iters), "-verify=false")...)
		cmd.Env = append(os.Environ(), "ORWL_PEER_TIMEOUT=10m") // valgrind's slowness is no lost peer
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, lastLines(string(out), 3))
		}
		syms, err := nmSymbols("go", "tool", "nm", stencil)
		if err != nil {
			return err
		}
		r, err := traceFootprint(dir, "orwl", syms, "github.com/orwl-go/orwl/examples/stencil/jacobi.line3", *iters, *window, *top)
		if err != nil {
			return err
		}
		r.Contender, r.Procs, r.Cells = "orwl", *procs, *cells
		add(r)

		mpi, cbin, cleanup := buildPeer("footprint", "the C MPI reference", "stencil", stencilSource, "-O2", "-no-pie")
		defer cleanup()
		if mpi != nil {
			l := lackey("mpi")
			if _, err := mpi.launch(*procs, mpi.shm, nil, l[0], append(l[1:], cbin, "1", n, "1", strconv.Itoa(*procs), "1", strconv.Itoa(*iters))...); err != nil {
				return err
			}
			csyms, err := nmSymbols("nm", cbin)
			if err != nil {
				return err
			}
			r, err := traceFootprint(dir, "mpi", csyms, "sweep", *iters, *window, 0)
			if err != nil {
				return err
			}
			r.Contender, r.Procs, r.Cells = "mpi-"+mpi.shm, *procs, *cells
			add(r)
		}
		for _, r := range rows {
			if len(r.FirstTouch) > 0 {
				rep.line("\n%s: data lines per window by the function that touched them first\n", r.Contender)
			}
			for _, f := range r.FirstTouch {
				rep.line("%8.1f  %s\n", f.Count, f.Name)
			}
			if len(r.TopInstrs) > 0 {
				rep.line("\n%s: instructions per iteration by function\n", r.Contender)
			}
			for _, f := range r.TopInstrs {
				rep.line("%8.0f  %s\n", f.Count, f.Name)
			}
		}
		return rep.write(rows)
	}
}

// traceFootprint measures the footprint in the median-sized trace of dir whose name starts
// with prefix: windows of window iterations cut at the entry of the function mark of syms,
// which a run of iters iterations enters the same number of times in each.
func traceFootprint(dir, prefix string, syms symbolTable, mark string, iters, window, top int) (footprintRow, error) {
	at, end, ok := syms.span(mark)
	if !ok {
		return footprintRow{}, fmt.Errorf("footprint: no function %s in the program", mark)
	}
	traces, err := filepath.Glob(filepath.Join(dir, prefix+".*"))
	if err != nil || len(traces) == 0 {
		return footprintRow{}, fmt.Errorf("footprint: no trace %s.* in %s", prefix, dir)
	}
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	slices.SortFunc(traces, func(a, b string) int { return cmp.Compare(size(a), size(b)) })
	path := traces[len(traces)/2]
	f, err := os.Open(path)
	if err != nil {
		return footprintRow{}, err
	}
	defer f.Close()
	entries, err := countEntries(f, at)
	if err != nil {
		return footprintRow{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return footprintRow{}, err
	}
	perIter := max(1, (entries+iters/2)/iters)
	w, err := measureWindows(f, at, end, perIter*window, entries/4, entries-entries/10, syms)
	if err != nil {
		return footprintRow{}, err
	}
	if len(w.windows) == 0 {
		return footprintRow{}, fmt.Errorf("footprint: %s holds no whole window of %d iterations (%d entries of %s)", path, window, entries, mark)
	}
	return w.row(window, top), nil
}

// A line of a lackey trace: "I  0075ffa0,3" for an instruction of 3 bytes, " L 1ffefff8c8,8"
// for a load of 8 bytes (S a store, M a load and a store); valgrind's own lines start "==".

// countEntries counts the instructions at address at in the trace r.
func countEntries(r io.Reader, at uint64) (int, error) {
	n := 0
	err := scanTrace(r, func(instr bool, addr uint64) {
		if instr && addr == at {
			n++
		}
	})
	return n, err
}

// scanTrace calls fn with each access of the trace r: an instruction, or data, and its address.
func scanTrace(r io.Reader, fn func(instr bool, addr uint64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 4 {
			continue
		}
		var instr bool
		switch {
		case line[0] == 'I':
			instr = true
		case line[0] == ' ' && (line[1] == 'L' || line[1] == 'S' || line[1] == 'M'):
		default:
			continue
		}
		hex, _, ok := bytes.Cut(bytes.TrimLeft(line[2:], " "), []byte(","))
		if addr, isHex := parseHex(hex); ok && isHex {
			fn(instr, addr)
		}
	}
	return sc.Err()
}

// parseHex parses the hexadecimal digits of b (at most 16).
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// footprintWindow is what one window touched and ran: its distinct data and code lines and
// pages, its instructions and those outside the kernel's function.
type footprintWindow struct {
	dataLines, codeLines, dataPages, codePages int
	instrs, outside                            int
}

// footprintWindows is what measureWindows found: each window, and over all windows the
// data lines each function touched first and the instructions each ran.
type footprintWindows struct {
	windows []footprintWindow
	first   map[string]int
	instrs  map[string]int
}

// measureWindows reads the trace r, cut into windows of span entries of the instruction at
// at, the start of the kernel's function [at, end), and measures those that lie between the
// entries from and to.
func measureWindows(r io.Reader, at, end uint64, span, from, to int, syms symbolTable) (footprintWindows, error) {
	w := footprintWindows{first: map[string]int{}, instrs: map[string]int{}}
	var (
		entries  int
		lastInst uint64
		cur      footprintWindow
		data     = map[uint64]uint64{} // line: the instruction that touched it first
		code     = map[uint64]bool{}
		dPages   = map[uint64]bool{}
		cPages   = map[uint64]bool{}
		ran      = map[uint64]int{} // instruction: times run in this window
		ranAll   = map[uint64]int{} // and in the windows measured
	)
	in := func() bool { return entries >= from && entries < to }
	err := scanTrace(r, func(instr bool, addr uint64) {
		if instr {
			if addr == at {
				if entries >= from && (entries-from)%span == 0 {
					if entries > from && entries <= to {
						cur.dataLines, cur.codeLines, cur.dataPages, cur.codePages = len(data), len(code), len(dPages), len(cPages)
						w.windows = append(w.windows, cur)
						for _, pc := range data {
							w.first[syms.name(pc)]++
						}
						for pc, n := range ran {
							ranAll[pc] += n
						}
					}
					cur = footprintWindow{}
					clear(ran)
					clear(data)
					clear(code)
					clear(dPages)
					clear(cPages)
				}
				entries++
			}
			lastInst = addr
			if in() {
				code[addr>>6], cPages[addr>>12] = true, true
				cur.instrs++
				if addr < at || addr >= end {
					cur.outside++
				}
				ran[addr]++
			}
			return
		}
		if in() {
			if _, seen := data[addr>>6]; !seen {
				data[addr>>6] = lastInst
			}
			dPages[addr>>12] = true
		}
	})
	for pc, n := range ranAll {
		w.instrs[syms.name(pc)] += n
	}
	return w, err
}

// row is the median window of w, and the top functions of the first touches and of the
// instructions; a window is window iterations.
func (w footprintWindows) row(window, top int) footprintRow {
	median := func(of func(footprintWindow) int) int {
		v := make([]int, len(w.windows))
		for k, x := range w.windows {
			v[k] = of(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	r := footprintRow{Window: window, Windows: len(w.windows),
		DataLines: median(func(x footprintWindow) int { return x.dataLines }),
		CodeLines: median(func(x footprintWindow) int { return x.codeLines }),
		DataPages: median(func(x footprintWindow) int { return x.dataPages }),
		CodePages: median(func(x footprintWindow) int { return x.codePages }),
		Instrs:    median(func(x footprintWindow) int { return x.instrs }) / window,
		Outside:   median(func(x footprintWindow) int { return x.outside }) / window,
	}
	r.FirstTouch = topFuncs(w.first, float64(len(w.windows)), top)
	r.TopInstrs = topFuncs(w.instrs, float64(len(w.windows)*window), top)
	return r
}

// topFuncs returns the top functions of counts, each count divided by per, the largest first.
func topFuncs(counts map[string]int, per float64, top int) []footprintFunc {
	var fs []footprintFunc
	for name, n := range counts {
		fs = append(fs, footprintFunc{name, float64(n) / per})
	}
	slices.SortFunc(fs, func(a, b footprintFunc) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
	})
	return fs[:min(top, len(fs))]
}

// symbolTable is a program's functions, sorted by address.
type symbolTable struct {
	addrs []uint64
	names []string
}

// span returns the addresses of the function name, from its start to the next function's
// (the end of the address space for the last).
func (t symbolTable) span(name string) (start, end uint64, ok bool) {
	i := slices.Index(t.names, name)
	if i < 0 {
		return 0, 0, false
	}
	end = ^uint64(0)
	if i+1 < len(t.addrs) {
		end = t.addrs[i+1]
	}
	return t.addrs[i], end, true
}

// name returns the function that holds address pc, or "?" outside the program's text.
func (t symbolTable) name(pc uint64) string {
	i, found := slices.BinarySearch(t.addrs, pc)
	if !found {
		i--
	}
	if i < 0 {
		return "?"
	}
	return t.names[i]
}

// parseSymbols reads the text symbols ("ADDR T NAME" or "ADDR t NAME", hexadecimal) of nm's
// output out.
func parseSymbols(out string) symbolTable {
	type sym struct {
		addr uint64
		name string
	}
	var syms []sym
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[1] != "T" && f[1] != "t") {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		syms = append(syms, sym{a, strings.Join(f[2:], " ")})
	}
	slices.SortStableFunc(syms, func(a, b sym) int { return cmp.Compare(a.addr, b.addr) })
	var t symbolTable
	for _, s := range syms {
		t.addrs, t.names = append(t.addrs, s.addr), append(t.names, s.name)
	}
	return t
}

// nmSymbols returns the functions of a program that the nm command argv lists: "go tool nm
// BIN" for a Go program, "nm BIN" for a C program built without position independence, so
// that its functions lie at their addresses under valgrind.
func nmSymbols(argv ...string) (symbolTable, error) {
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		return symbolTable{}, fmt.Errorf("%s: %v", strings.Join(argv, " "), err)
	}
	return parseSymbols(string(out)), nil
}
