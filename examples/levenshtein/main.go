// Command levenshtein computes the edit distance (Levenshtein: insert, delete and substitute
// cost 1) of two strings by a wavefront over ORWL tasks: each task owns a band of the
// columns of the matrix of partial distances and walks down it in blocks of rows, reading
// its left neighbour's edge and publishing its own through iterative locations (package
// github.com/orwl-go/orwl/examples/levenshtein/wavefront describes the pipeline and why it
// is deadlock-free). The distance is the same whatever the tasks, processes and block size.
//
// The strings come from two files (-a FILE -b FILE, whole files or pipes, one trailing
// newline of each left out, at most 4 GiB each) or are generated (-gen N: two strings of N characters of ACGT, drawn from
// -seed and -seed+1):
//
//	go run ./examples/levenshtein -gen 100000
//	go run ./examples/levenshtein -a left.txt -b right.txt -tasks 4 -block 512 -np 2
//
// -tasks defaults to -np when given, else to the launcher's process count, else to one per
// core; -np starts that many processes on this machine (default 1: every task a goroutine
// of this process). Started by a launcher (orwlrun -np N, mpirun, srun) it is one process of
// that job and starts nothing itself; every process reads the files (or generates the
// strings) itself. The process that runs task 0 prints, last, the result line:
//
//	result: la=100000 lb=100000 tasks=2 distance=51738 seconds=4.115 gcups=2.430 procs=1 block=1024
//
// where seconds runs from the schedule to the end of the last task and GCUPS is la·lb /
// seconds / 1e9 (-json prints one JSON object with the same fields instead). -verify also
// computes the distance with one sequential loop and adds verified=true or false. Flags
// that make no sense are reported in one line on standard error with exit status 2; a
// failed run exits with status 1; a failed verification with status 3.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"

	"github.com/orwl-go/orwl/examples/levenshtein/wavefront"
	"github.com/orwl-go/orwl/internal/exampleutil"
	"github.com/orwl-go/orwl/orwl"
)

// Exit statuses.
const (
	exitFailed   = exampleutil.ExitFailed
	exitUsage    = exampleutil.ExitUsage
	exitMismatch = 3 // the distance differs from the sequential loop's
)

// sequential is the reference of -verify; tests replace it to see a failed check.
var sequential = wavefront.Sequential

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed and checked command line.
type config struct {
	exampleutil.Where // processes, and whether a launcher started this one
	p                 wavefront.Params
	verify            bool
	json              bool
	args              []string
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("levenshtein", flag.ContinueOnError)
	fileA := fs.String("a", "", "file holding string A (one trailing newline is left out)")
	fileB := fs.String("b", "", "file holding string B")
	gen := fs.Int("gen", -1, "generate A and B of this many characters instead of reading files")
	seed := fs.Uint64("seed", 1, "seed of generated A; B's is seed+1")
	tasks := fs.Int("tasks", 0, "tasks, each owning a band of B (default: -np, else the launcher's process count, else one per core)")
	block := fs.Int("block", 1024, "rows of A per block: the height of a tile")
	np := fs.Int("np", 1, "processes started on this machine; ignored under a launcher")
	verify := fs.Bool("verify", false, "also compute the distance with one sequential loop and compare")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the result line")
	if err := exampleutil.Parse(fs, args, "usage: levenshtein (-a FILE -b FILE | -gen N) [flags]", stderr); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c := &config{verify: *verify, json: *asJSON, args: args}
	info, err := orwl.Environment()
	if err != nil {
		return nil, fmt.Errorf("%v", err)
	}
	c.InJob = info.Launched()
	switch {
	case *np < 1:
		return nil, fmt.Errorf("-np is %d; need at least 1", *np)
	case set["tasks"] && (*tasks < 1 || *tasks > wavefront.MaxTasks):
		return nil, fmt.Errorf("-tasks is %d; need 1 to %d", *tasks, wavefront.MaxTasks)
	case *block < 1:
		return nil, fmt.Errorf("-block is %d; need at least 1", *block)
	case set["gen"] && *gen < 0:
		return nil, fmt.Errorf("-gen is %d; need at least 0", *gen)
	}
	c.Procs = *np
	if c.InJob {
		c.Procs = info.Size
	}
	switch {
	case set["tasks"]:
		c.p.Tasks = *tasks
	case set["np"]:
		c.p.Tasks = *np
	case c.InJob:
		c.p.Tasks = info.Size
	default:
		c.p.Tasks = runtime.NumCPU()
	}
	if c.Procs > c.p.Tasks {
		return nil, fmt.Errorf("%d processes for %d tasks; need at most one process per task", c.Procs, c.p.Tasks)
	}
	c.p.Block = *block
	if c.p.A, c.p.B, err = input(*fileA, *fileB, *gen, *seed); err != nil {
		return nil, err
	}
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
	return exampleutil.Run("levenshtein", args, stdout, stderr, parse, compute)
}

// jsonResult is the -json output: the result line's fields.
type jsonResult struct {
	LA       int     `json:"la"`
	LB       int     `json:"lb"`
	Tasks    int     `json:"tasks"`
	Distance int     `json:"distance"`
	Seconds  float64 `json:"seconds"`
	GCUPS    float64 `json:"gcups"`
	Procs    int     `json:"procs"`
	Block    int     `json:"block"`
	Verified *bool   `json:"verified,omitempty"` // with -verify
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
	r := jsonResult{LA: la, LB: lb, Tasks: c.p.Tasks, Distance: res.Distance, Seconds: res.Seconds,
		GCUPS: wavefront.GCUPS(la, lb, res.Seconds), Procs: c.Procs, Block: c.p.Block}
	if c.verify {
		ok := sequential(c.p.A, c.p.B) == res.Distance
		r.Verified = &ok
	}
	if c.json {
		out, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(out))
	} else {
		line := fmt.Sprintf("result: la=%d lb=%d tasks=%d distance=%d seconds=%.3f gcups=%.3f procs=%d block=%d",
			r.LA, r.LB, r.Tasks, r.Distance, r.Seconds, r.GCUPS, r.Procs, r.Block)
		if r.Verified != nil {
			line += fmt.Sprintf(" verified=%v", *r.Verified)
		}
		fmt.Fprintln(stdout, line)
	}
	if r.Verified != nil && !*r.Verified {
		fmt.Fprintln(stderr, "levenshtein: the distance differs from the sequential loop's")
		return exitMismatch
	}
	return 0
}
