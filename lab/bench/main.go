// Command bench runs the benchmarks of orwl-go. Each subcommand lives in its
// own file(s) and registers itself from an init function with register (add
// a file such as matmul.go with its own init to add a subcommand):
//
//	go run ./bench kernels [flags]   GFLOP/s of the DGEMM kernel plugins
//	go run ./bench matmul [flags]    ORWL matmul against roofline, shared memory, StarPU, ScaLAPACK (matmul.go)
//	go run ./bench cholesky [flags]  ORWL tiled Cholesky against OpenBLAS dpotrf, StarPU and ScaLAPACK PDPOTRF (cholesky.go)
//	go run ./bench stencil [flags]   ORWL Jacobi stencil against a C MPI halo exchange, TCP and shared memory (stencil.go)
//	go run ./bench wavefront [flags] ORWL Levenshtein wavefront against C's sequential loop and an OpenMP wavefront, by block size (wavefront.go)
//	go run ./bench sweep [flags]     matmul's defaults against the best block size, grid and tasks per process (sweep.go)
//	go run ./bench hosts [flags]     matmul across emulated hosts on shaped links against max(compute, bytes / rate) (hosts.go, root)
//	go run ./bench hybrid [flags]    mixed-kernel matmul, dynamic balancing against static splits (hybrid.go)
//	go run ./bench grant [flags]     remote grants of a 256 MiB location against raw TCP; memory while streaming (grant.go)
//	go run ./bench faults [flags]    time for a job to fail after a process is killed, stopped or cut off (faults.go)
//	go run ./bench external [flags]  external programs on memfd files against tmpfs and disk files (external.go, Linux)
//	go run ./bench checkpoint [flags] stencil checkpoints: overhead, hold, kill trials under orwlrun -restarts, disk (checkpoint.go)
//	go run ./bench figures [flags]   rewrites the README's Figures section from the others (figures.go)
//
// Run "go run ./bench <command> -h" for a command's flags. The command only
// measures and reports; it must not be imported by programs.
//
// # kernels
//
// Measures N×N×N DGEMM (C = A·B) for every available plugin, or those named
// by -kernels, at the sizes of -n (default 256..4096 on CPU, 256..16384 on
// GPU), and in the same run the references each plugin is compared with:
//
//   - ref:openblas-c: cblas_dgemm called from a C program built with gcc
//     against libopenblas.so.0 (skipped with a message without gcc or the
//     library; -cref gives a prebuilt one), same N and thread count.
//   - ref:gonum: gonum's Dgemm called directly.
//   - ref:cublas-raw: a bare cublasDgemm loop on device buffers, through
//     purego from the same library files; compared with cublas-resident
//     (Kernel.Gemm on device-resident matrices).
//   - ref:cuda-h2h-bound: max(raw cublasDgemm time, time to move A and B up
//     and C down with cudaMemcpy on pinned memory); compared with cublas
//     (host-slice Dgemm on Go slices) and cublas-pinned (host-slice Dgemm on
//     AllocHost slices).
//
// Rows are measured in interleaved rounds (-rounds, -time); GFLOP/s is the
// best round, with the median beside it, and ratio is plugin/reference. The
// table (or with -json one JSON object per measurement: kernel, n, threads,
// gflops, median_gflops, seconds, reps, samples, device, reference, ref,
// ratio) goes to standard output; -out receives kernels.svg, a chart of
// GFLOP/s against N, and kernels.json with every measurement.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/kernels"
)

// command is a bench subcommand.
type command struct {
	summary string
	run     func(args []string) error
}

// commands holds the subcommands by name, filled by register.
var commands = map[string]command{}

// register adds a subcommand; files call it from init.
func register(name, summary string, run func(args []string) error) {
	if _, dup := commands[name]; dup {
		panic("bench: command registered twice: " + name)
	}
	commands[name] = command{summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: bench <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", name, commands[name].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	switch err := cmd.run(os.Args[2:]); {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// usageError is a mistake in a command's flags: main reports it in one line and exits 2.
type usageError struct{ error }

// badFlags returns a usageError.
func badFlags(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// parseFlags parses a command's args into fs: a mistake, or arguments left over, is a
// usageError; -h prints the flags and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stderr)
		fmt.Fprintf(os.Stderr, "usage: bench %s [flags]\n", fs.Name())
		fs.PrintDefaults()
		return err
	case err != nil:
		return usageError{err}
	case fs.NArg() > 0:
		return badFlags("unexpected arguments %q", fs.Args())
	}
	return nil
}

// outputFlags declares a command's -out, the folder for the files it writes (named in
// files), and -json.
func outputFlags(fs *flag.FlagSet, files string) (out *string, asJSON *bool) {
	return fs.String("out", "results", "folder for "+files),
		fs.Bool("json", false, "print one JSON object per row instead of the table")
}

// splitList returns the non-empty, trimmed elements of a comma-separated list.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// intList parses a non-empty comma-separated list of positive integers.
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q is not a list of positive integers", s)
	}
	return out, nil
}

// setThreads asks g for threads host threads per call; a kernel that cannot
// honour it (gonum follows GOMAXPROCS) keeps its own setting.
func setThreads(g kernels.Gemm, threads int) error {
	if err := g.SetThreads(threads); err != nil && !errors.Is(err, kernels.ErrThreads) {
		return err
	}
	return nil
}

// printJSON prints v as one JSON line on standard output (the -json output).
func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// report is the output of a command: a table printed on standard output and kept for its
// .txt file, or with -json one JSON object per row on standard output (the table is still
// kept for the file).
type report struct {
	asJSON bool
	table  strings.Builder
}

// line adds a line to the table, printed unless the report is JSON.
func (r *report) line(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	r.table.WriteString(s)
	if !r.asJSON {
		fmt.Print(s)
	}
}

// row prints v as one JSON line when the report is JSON.
func (r *report) row(v any) {
	if r.asJSON {
		printJSON(v)
	}
}

// printTable reports a finished table and its rows at once (see report), and writes both
// to out with writeTable.
func printTable[R any](out, name string, asJSON bool, rows []R, table string) error {
	rep := &report{asJSON: asJSON}
	rep.line("%s", table)
	for _, r := range rows {
		rep.row(r)
	}
	return writeTable(out, name, rows, rep.table.String())
}

// writeTable writes rows as an indented JSON array to out/name.json and the
// table to out/name.txt, creating out.
func writeTable(out, name string, rows any, table string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name+".txt"), []byte(table), 0o644)
}
