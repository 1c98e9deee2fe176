// Command levenshtein computes the edit distance (Levenshtein: insert, delete and substitute
// cost 1) of two strings by a wavefront over ORWL tasks: each task owns a band of the
// columns of the matrix of partial distances and walks down it in blocks of rows, reading
// its left neighbour's edge and publishing its own through iterative locations (package
// github.com/orwl-go/orwl/examples/levenshtein/wavefront describes the pipeline and why it
// is deadlock-free). The distance is the same whatever the tasks, processes and block size.
//
// The strings come from two files (-a FILE -b FILE, whole files or pipes, one trailing
// newline of each left out, at most 4 GiB each) or are generated (-gen N: two strings of N
// characters of ACGT, drawn from -seed and -seed+1):
//
//	go run ./examples/levenshtein -gen 100000
//	go run ./examples/levenshtein -a left.txt -b right.txt -tasks 4 -block 512 -np 2
//
// The command line is the examples' (package examples/internal/cli): -tasks (a count;
// default -np when given, else the launcher's process count, else one per core), -np
// (processes started on this machine, default 1: every task a goroutine of this process),
// -json, -trace FILE. Started by a launcher (orwlrun -np N, mpirun, srun) it is one process
// of that job and starts nothing itself; every process reads the files (or generates the
// strings) itself. The process that runs task 0 prints, last, the result line:
//
//	result: la=100000 lb=100000 distance=51738 block=1024 tasks=2 procs=1 seconds=4.115 gcups=2.430 verified=true
//
// where seconds runs from the schedule to the end of the last task and GCUPS is la·lb /
// seconds / 1e9 (-json prints one JSON object with the same keys instead). The distance is
// verified against one sequential loop when that is cheap (la·lb at most 2^28 cells, a
// fraction of a second), or always with -verify, never with -verify=false (verified=skipped).
// Flags that make no sense are reported in one line on standard error with exit status 2;
// a failed run exits with status 1; a failed verification with status 3.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/levenshtein/wavefront"
)

// Exit statuses.
const (
	exitFailed   = cli.ExitFailed
	exitUsage    = cli.ExitUsage
	exitMismatch = cli.ExitMismatch // the distance differs from the sequential loop's
)

// verifyCells is the most cells (la·lb) verified without -verify: the sequential loop then
// takes a fraction of a second.
const verifyCells = 1 << 28

// sequential is the reference of -verify; tests replace it to see a failed check.
var sequential = wavefront.Sequential

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed and checked command line.
type config struct {
	cli.Job
	p      wavefront.Params
	verify bool
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("levenshtein", flag.ContinueOnError)
	c := &config{}
	c.Flags(fs, cli.Layout{Tasks: runtime.NumCPU(), TasksDoc: "one per core", MaxTasks: wavefront.MaxTasks})
	fileA := fs.String("a", "", "file holding string A (one trailing newline is left out)")
	fileB := fs.String("b", "", "file holding string B")
	gen := fs.Int("gen", -1, "generate A and B of this many characters instead of reading files")
	seed := fs.Uint64("seed", 1, "seed of generated A; B's is seed+1")
	block := fs.Int("block", 1024, "rows of A per block: the height of a tile")
	verify := fs.Bool("verify", false, "compare the distance with one sequential loop's (default: when la·lb is at most 2^28)")
	if err := cli.Parse(fs, args, "usage: levenshtein (-a FILE -b FILE | -gen N) [flags]", stderr); err != nil {
		return nil, err
	}
	set := cli.Set(fs)
	switch {
	case *block < 1:
		return nil, fmt.Errorf("-block is %d; need at least 1", *block)
	case set["gen"] && *gen < 0:
		return nil, fmt.Errorf("-gen is %d; need at least 0", *gen)
	}
	if err := c.Resolve(0); err != nil {
		return nil, err
	}
	c.p.Tasks, c.p.Block, c.p.Trace = c.Tasks, *block, c.Trace
	var err error
	if c.p.A, c.p.B, err = input(*fileA, *fileB, *gen, *seed); err != nil {
		return nil, err
	}
	c.verify = *verify || !set["verify"] && len(c.p.A)*len(c.p.B) <= verifyCells
	return c, c.p.Validate()
}

// input reads the strings from the files a and b, or generates them when gen >= 0.
func input(a, b string, gen int, seed uint64) ([]byte, []byte, error) {
	switch {
	case gen >= 0 && (a != "" || b != ""):
		return nil, nil, fmt.Errorf("-gen and -a/-b exclude each other")
	case gen > wavefront.MaxLen:
		return nil, nil, fmt.Errorf("-gen is %d; at most %d", gen, wavefront.MaxLen)
	case gen >= 0:
		return wavefront.Generate(gen, seed), wavefront.Generate(gen, seed+1), nil
	case a == "" || b == "":
		return nil, nil, fmt.Errorf("give both strings: -a FILE -b FILE, or -gen N")
	}
	sa, err := readString("-a", a)
	if err != nil {
		return nil, nil, err
	}
	sb, err := readString("-b", b)
	return sa, sb, err
}

// readString returns the content of file, the value of flag, one trailing newline left
// out. It reads a regular file or a pipe, at most wavefront.MaxLen bytes and the newline:
// a device (/dev/zero never ends) or a longer file is refused before anything is read,
// and a pipe that goes on past that as soon as it does.
func readString(flag, file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	limit := int64(wavefront.MaxLen) + 1 // with the newline
	switch {
	case fi.Mode()&fs.ModeDevice != 0:
		return nil, fmt.Errorf("%s %s: not a regular file nor a pipe (a device)", flag, file)
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeNamedPipe == 0:
		return nil, fmt.Errorf("%s %s: not a regular file nor a pipe (mode %v)", flag, file, fi.Mode())
	case fi.Size() > limit:
		return nil, fmt.Errorf("%s %s: %d bytes; a string has at most %d", flag, file, fi.Size(), wavefront.MaxLen)
	}
	s, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	s, _ = bytes.CutSuffix(s, []byte("\n"))
	if len(s) > wavefront.MaxLen {
		return nil, fmt.Errorf("%s %s: more than %d bytes; a string has at most %d", flag, file, wavefront.MaxLen, wavefront.MaxLen)
	}
	return s, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run("levenshtein", args, stdout, stderr, parse, compute)
}

// compute runs this process's part of the job and, in the process of task 0, reports.
func compute(c *config, stdout, stderr io.Writer) int {
	res, err := wavefront.Run(context.Background(), c.p)
	if err != nil {
		fmt.Fprintln(stderr, "levenshtein:", err)
		return exitFailed
	}
	if res == nil {
		return 0 // another process runs task 0 and reports
	}
	la, lb := len(c.p.A), len(c.p.B)
	var r cli.Result
	r.Add("la", la)
	r.Add("lb", lb)
	r.Add("distance", res.Distance)
	r.Add("block", c.p.Block)
	r.Job(c.Tasks, c.Procs)
	r.Seconds(res.Seconds)
	r.Addf("gcups", "%.3f", wavefront.GCUPS(la, lb, res.Seconds))
	if c.verify {
		r.Verified(sequential(c.p.A, c.p.B) == res.Distance)
	}
	return r.Report(stdout, stderr, "levenshtein", c.JSON)
}
