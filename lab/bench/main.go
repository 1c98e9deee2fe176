// Command bench is the lab of orwl-go: it measures the library against its references
// (C, OpenBLAS, MPI, StarPU, ScaLAPACK, whose programs live in the folders beside this
// file). Run it from the checkout's root (the go.work there puts the lab's module beside the
// library's):
//
//	go run ./lab/bench kernels [flags]    GFLOP/s of the DGEMM kernel plugins
//	go run ./lab/bench matmul [flags]     ORWL matmul against roofline, shared memory, StarPU, ScaLAPACK (matmul.go)
//	go run ./lab/bench first [flags]      the first multiplication against C OpenBLAS's cold call (first.go)
//	go run ./lab/bench cholesky [flags]   ORWL tiled Cholesky against OpenBLAS dpotrf, StarPU and ScaLAPACK PDPOTRF (cholesky.go)
//	go run ./lab/bench stencil [flags]    ORWL Jacobi stencil against a C MPI halo exchange, TCP and shared memory (stencil.go)
//	go run ./lab/bench wavefront [flags]  ORWL Levenshtein wavefront against C's sequential loop and an OpenMP wavefront, by block size (wavefront.go)
//	go run ./lab/bench sweep [flags]      matmul's defaults against the best block size, grid and tasks per process (sweep.go)
//	go run ./lab/bench hosts [flags]      matmul across emulated hosts on shaped links against max(compute, bytes / rate) (hosts.go, root)
//	go run ./lab/bench hybrid [flags]     mixed-kernel matmul, dynamic balancing against static splits (hybrid.go)
//	go run ./lab/bench grant [flags]      remote grants of a 256 MiB location against raw TCP; memory while streaming (grant.go)
//	go run ./lab/bench faults [flags]     time for a job to fail after a process is killed, stopped or cut off (faults.go)
//	go run ./lab/bench external [flags]   external programs on memfd files against tmpfs and disk files (external.go, Linux)
//	go run ./lab/bench checkpoint [flags] stencil checkpoints: overhead, hold, kill trials under orwlrun -restarts, disk (checkpoint.go)
//	go run ./lab/bench scale [flags]      jobs of 4 to 256 processes on this machine, ORWL beside Open MPI: start, per iteration, memory, threads, fds, shm (scale.go)
//	go run ./lab/bench footprint [flags]  cache lines and pages one process touches per iteration of the stencil, ORWL beside Open MPI, under valgrind (footprint.go)
//	go run ./lab/bench figures [flags]    rewrites the figures of docs/performance.md and lab/results from the others (figures.go)
//
// Run "go run ./lab/bench <command> -h" for a command's flags. A command measures, prints
// its table (or with -json one JSON object per row) and writes its files into the folder
// of -out, by default orwl-bench in the system's temporary folder (it says where it wrote);
// only figures writes into the checkout. The command must not be imported by programs.
//
// Each subcommand lives in its own file(s) and registers a command record from an init
// function with register: its name, a line of help, the files it writes, the child
// processes it starts, and a setup that declares its flags and returns its body. What they
// share (flags, -out, -json, the table and its files) is done once, by command.run.
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
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/kernels"
)

// command is a bench subcommand: a record that main runs with run, which does what every
// command has in common (child processes, flags, -out and -json, the files it writes).
type command struct {
	name    string // what follows bench on the command line
	summary string // one line of the usage
	// files names what the command writes into -out, for -out's help and the line that says
	// where it wrote; a command without files (figures) has neither -out nor -json.
	files []string
	// children are the processes the command starts of itself, told apart by a variable of
	// their environment.
	children []child
	// setup declares the command's own flags on fs and returns its body, which runs once they
	// are parsed, with the run's report; it checks its flags' values first (badFlags).
	setup func(fs *flag.FlagSet) func(rep *report) error
}

// commands holds the subcommands by name, filled by register.
var commands = map[string]command{}

// register adds a subcommand; files call it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("bench: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// child is a kind of process that a command starts of itself: the bench runs it instead of
// the command when the variable env is set in its environment.
type child struct {
	env string
	run func(spec string) error // given env's value
}

// jsonChild returns a child whose variable env holds the JSON of a T, which it decodes
// and runs with.
func jsonChild[T any](env string, run func(T) error) child {
	return child{env, func(spec string) error {
		var v T
		if err := json.Unmarshal([]byte(spec), &v); err != nil {
			return fmt.Errorf("bad %s %q: %w", env, spec, err)
		}
		return run(v)
	}}
}

// tableFiles are the files of a command that writes its table (name.txt) and rows
// (name.json), with extra files.
func tableFiles(name string, extra ...string) []string {
	return append([]string{name + ".txt", name + ".json"}, extra...)
}

// defaultOut is where the commands write when -out is not given: outside the checkout, so
// that only figures writes the lab's results.
var defaultOut = filepath.Join(os.TempDir(), "orwl-bench")

// run runs the command with args (what follows its name): as a child process when one of
// its children's variables is set, else it parses its flags, runs its body and says where it
// wrote its files.
func (c command) run(args []string) error {
	for _, ch := range c.children {
		if spec, ok := os.LookupEnv(ch.env); ok {
			return ch.run(spec)
		}
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	rep := &report{cmd: c.name, args: args}
	if len(c.files) > 0 {
		fs.StringVar(&rep.out, "out", defaultOut, "folder for "+joinAnd(c.files))
		fs.BoolVar(&rep.asJSON, "json", false, "print one JSON object per row instead of the table")
	}
	body := c.setup(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := body(rep); err != nil {
		return err
	}
	if len(c.files) > 0 {
		fmt.Fprintf(os.Stderr, "bench %s: wrote %s in %s\n", c.name, joinAnd(c.files), rep.out)
	}
	return nil
}

// joinAnd lists names as "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
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

// report is a run of a command and its output: a table printed on standard output and
// kept for its .txt file, or with -json one JSON object per row on standard output (the
// table is still kept for the file); write puts both into the folder of -out.
type report struct {
	cmd    string   // the command's name
	args   []string // its flags as given
	out    string   // -out
	asJSON bool     // -json
	table  strings.Builder
}

// header starts the table with the command line that made it and a line of context:
// format and a, after "# ".
func (r *report) header(format string, a ...any) {
	fmt.Fprintf(&r.table, "# go run ./lab/bench %s %s\n# %s\n", r.cmd, strings.Join(r.args, " "), fmt.Sprintf(format, a...))
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

// write writes rows as an indented JSON array to the command's .json file and the table to
// its .txt file, in the folder of -out, which it creates.
func (r *report) write(rows any) error {
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.out, r.cmd+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, r.cmd+".txt"), []byte(r.table.String()), 0o644)
}

// goBuild builds the commands of the module's packages pkgs (paths below
// github.com/orwl-go/orwl) into dir and returns their files, in the same order.
func goBuild(dir string, pkgs ...string) ([]string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("no go command")
	}
	var bins []string
	for _, pkg := range pkgs {
		bin := filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/orwl-go/orwl/"+pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v: %s", pkg, err, firstLine(out))
		}
		bins = append(bins, bin)
	}
	return bins, nil
}
