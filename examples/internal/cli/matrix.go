package cli

import (
	"flag"
	"fmt"
	"runtime"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/kernels/gonum"
)

// MatrixLayout is what the examples on dense matrices choose differently: the words
// their help uses and their defaults.
type MatrixLayout struct {
	N, GonumN int    // -n's default with a BLAS kernel, and with the pure-Go gonum kernel
	NDoc      string // what -n is ("matrix size N")
	NBDoc     string // what -nb is, with its default
	GridDoc   string // how the grid is chosen without -grid
	KernelDoc string // the kernels -kernel takes
	Reps      int    // -reps's default
	RepsDoc   string // what -reps is
	SeedDoc   string // what -seed draws
}

// Matrix is the command line the examples on N x N matrices dealt 2-D block-cyclically
// over a P x Q grid of tasks (matmul, cholesky) share beside Job's: -n, -nb, -grid,
// -kernel, -threads, -reps, -seed. Register it with Flags; once the flags are parsed,
// Resolve fills it and the Job; the example then sets Grid and NB when not Given.
type Matrix struct {
	N, NB      int
	Grid       grid.Grid
	KernelSpec string   // -kernel as the result prints it ("cpu" and "auto" resolved)
	Kernel     string   // -kernel as given
	Kernels    []string // the kernel of every task
	Threads    int      // kernel threads per process
	Reps       int
	Seed       uint64
	Given      map[string]bool // the flags set on the command line

	fs            *flag.FlagSet
	grid          string
	blasN, gonumN int // -n's defaults
}

// Flags registers the flags on fs.
func (m *Matrix) Flags(fs *flag.FlagSet, l MatrixLayout) {
	m.fs = fs
	fs.IntVar(&m.N, "n", 0, fmt.Sprintf("%s (default: %d with a BLAS kernel, %d with gonum)", l.NDoc, l.N, l.GonumN))
	fs.IntVar(&m.NB, "nb", 0, l.NBDoc)
	fs.StringVar(&m.grid, "grid", "", "task grid PxQ (default: "+l.GridDoc+")")
	fs.StringVar(&m.Kernel, "kernel", "cpu", "kernel: "+l.KernelDoc)
	fs.IntVar(&m.Threads, "threads", 0, "kernel threads per process (default: cores / tasks on this host, at least 1)")
	fs.IntVar(&m.Reps, "reps", l.Reps, l.RepsDoc)
	fs.Uint64Var(&m.Seed, "seed", 1, "seed of "+l.SeedDoc)
	m.blasN, m.gonumN = l.N, l.GonumN
}

// Resolve checks the flags, resolves j (with -grid's tasks), resolves -kernel to one
// kernel per task (kernels.ParseMix), and sets -n's and -threads's defaults. Mistakes are
// returned as errors that name the flag.
func (m *Matrix) Resolve(j *Job, maxTasks int) error {
	m.Given = Set(m.fs)
	switch {
	case m.Given["nb"] && m.NB < 1:
		return fmt.Errorf("-nb is %d; need at least 1", m.NB)
	case m.Given["n"] && m.N < 1:
		return fmt.Errorf("-n is %d; need at least 1", m.N)
	case m.Reps < 1:
		return fmt.Errorf("-reps is %d; need at least 1", m.Reps)
	case m.Threads < 0:
		return fmt.Errorf("-threads is %d; need at least 0 (0: default)", m.Threads)
	}
	gridTasks := 0
	if m.Given["grid"] {
		var err error
		if m.Grid, err = grid.Parse(m.grid, maxTasks); err != nil {
			return fmt.Errorf("-grid: %v", err)
		}
		gridTasks = m.Grid.Tasks()
	}
	if err := j.Resolve(gridTasks); err != nil {
		return err
	}
	var err error
	if m.Kernels, m.KernelSpec, err = ParseKernels(m.Kernel, j.Tasks); err != nil {
		return err
	}
	if !m.Given["n"] {
		m.N = m.blasN
		if m.KernelSpec == gonum.Name {
			m.N = m.gonumN
		}
	}
	if m.Threads == 0 {
		m.Threads = max(1, runtime.NumCPU()/j.TasksOnHost())
	}
	return nil
}

// CheckMemory refuses a job whose tasks on this host need more memory than it has
// available, each task bytesPerTask.
func (m *Matrix) CheckMemory(j *Job, bytesPerTask float64) error {
	need := bytesPerTask * float64(j.TasksOnHost())
	if avail := AvailableMemory(); avail > 0 && need > avail {
		return fmt.Errorf("-n %d over %d tasks needs about %.3g GiB of memory on this host, and %.3g GiB is available: use a smaller -n, or more hosts",
			m.N, j.Tasks, need/(1<<30), avail/(1<<30))
	}
	return nil
}
