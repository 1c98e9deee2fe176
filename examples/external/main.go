// Command external is the ring of examples/blockbound (the introductory example of the ORWL
// papers) where every task's step is an unmodified external program: step.py, a Python 3
// script beside this file (standard library only), run through package external on the
// task's handles. At position 0 the script reads the task's block and its left neighbour's
// bound and writes the new block; at position 1 it reads the block and writes the bound.
// The data reach the script as memory-backed files, never a disk.
//
// It takes the same flags as examples/blockbound, plus -python, and prints the same bounds,
// bit for bit: the script does the same floating-point operations in the same order. It
// exits with status 3 if they differ from a sequential sweep's. Every step starts a
// Python process, so it is slower than blockbound by about the start time of Python per step.
//
//	go run ./examples/external -tasks 4 -size 1000 -iters 100
//	go build -o /tmp/ext ./examples/external && go run ./cmd/orwlrun -np 3 /tmp/ext
//
// The script is built into the binary (and given to Python with -c), so the binary runs from
// any directory, under any launcher.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/examples/blockring"
	"github.com/orwl-go/orwl/external"
	"github.com/orwl-go/orwl/orwl"
)

//go:embed step.py
var stepScript string

// python is -python: the interpreter that runs step.py (tests call ring without flags).
var python = "python3"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return blockring.Command{Name: "external", Ring: ring, Reference: blockring.Sequential, Flags: func(fs *flag.FlagSet) {
		fs.StringVar(&python, "python", "python3", "the Python 3 interpreter that runs step.py")
	}}.Run(args, stdout, stderr)
}

// ring runs the example with ORWL and returns every task's final bound, or nil in a process
// that does not run task 0.
func ring(ctx context.Context, j blockring.Job) ([]float64, error) {
	py, err := interpreter(ctx, python)
	if err != nil {
		return nil, err
	}
	// -I ignores the PYTHON* environment variables and the user's site directory, -S the
	// site module: the script behaves the same everywhere, and Python starts faster.
	script := func(args ...string) *external.Cmd {
		return external.Command(py, append([]string{"-I", "-S", "-c", stepScript}, args...)...)
	}
	return blockring.Run(ctx, j, func(ctx context.Context, t *orwl.Task, r *blockring.Ring) (float64, error) {
		// Position 0: the new block from my block and the left neighbour's bound.
		step := script("block", strconv.Itoa(t.ID()), "{block}", "{left}", "{new}")
		step.Input("block", r.BlockW)
		step.Input("left", r.LeftR)
		step.Output("new", r.BlockW)
		// Position 1: my bound from my block.
		bound := script("bound", "{block}", "{bound}")
		bound.Input("block", r.BlockR)
		bound.Output("bound", r.BoundW)
		if err := t.Iterate(ctx, j.Iters, func(int) error {
			if err := step.Run(ctx); err != nil {
				return err
			}
			return bound.Run(ctx)
		}); err != nil {
			return 0, err
		}
		// BlockW's next turn comes first in the next iteration and is already granted: it
		// reads the block's last value, which is the task's last bound.
		last := 0.0
		err := r.BlockW.Section(ctx, func(block []byte) error {
			b := orwl.Float64s(block)
			last = b[len(b)-1]
			return nil
		})
		return last, err
	})
}

// interpreter returns the path of the Python interpreter that name runs. Asking it once
// skips the wrapper a version manager (pyenv, asdf) puts in $PATH at every step.
func interpreter(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, name, "-I", "-S", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("python interpreter %q (see -python): %w", name, err)
	}
	path := strings.TrimSpace(string(out))
	if path == "" {
		return "", fmt.Errorf("python interpreter %q (see -python) does not say where it is", name)
	}
	return path, nil
}
