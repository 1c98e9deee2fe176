// Package cli is the command-line skeleton every example command shares: the main
// function's body (Run: flags parsed into a FlagSet of the example's own, with one-line
// errors; the job's processes started on this machine; the exit statuses), the flags every
// example takes and their meaning (Job: -tasks, -np, -json, -trace, and -checkpoint and
// -checkpoint-every where the example takes checkpoints), the result line and its JSON
// (Result), and what the commands need of their host (the -kernel flag, memory, cores, the
// progress line).
//
// It lives under examples/internal because it is for the examples alone: it parses and
// prints for commands, it must not compute, and neither the library nor the lab may import
// it.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"

	"github.com/orwl-go/orwl/orwl"
)

// Exit statuses of the examples.
const (
	ExitFailed   = 1 // the job failed
	ExitUsage    = 2 // bad flags
	ExitMismatch = 3 // the job ran, and its result did not verify
)

// Parse parses args into fs. With -h it prints usage and the flags on stderr and returns
// flag.ErrHelp; a mistake, or an argument left over, is returned as an error of one line
// and prints nothing.
func Parse(fs *flag.FlagSet, args []string, usage string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
		return err
	case err != nil:
		return err
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Set returns the names of the flags of fs set on the command line.
func Set(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// Config is a parsed command line.
type Config interface {
	// Start returns how many processes of the job to start on this machine: 1 to run the
	// job (or, under a launcher, this process's part of it) in this process.
	Start() int
}

// Layout is how an example chooses its tasks and processes when the flags do not say.
type Layout struct {
	Tasks    int    // tasks when no flag nor launcher says
	TasksDoc string // how Tasks is chosen, for -tasks's help ("one per core")
	MaxTasks int    // the most tasks the example takes; 0: no limit of its own
	Grid     bool   // the example takes -grid PxQ, whose P*Q is then the tasks
	// Spread: without -np, start min(tasks, cores) processes on this machine instead of
	// one (every task then a goroutine of this process).
	Spread      bool
	Checkpoints bool // the example takes checkpoints: -checkpoint and -checkpoint-every
}

// Job is the part of the command line every example shares. -tasks is always a count of
// tasks (an example that lays them on a grid takes -grid PxQ beside it); -np is the
// processes started on this machine, ignored under a launcher (orwlrun, mpirun, srun, the
// pods of a Kubernetes Indexed Job), which says how many processes the job has. An example
// embeds Job in its configuration, registers its flags with Flags and resolves them with
// Resolve; the configuration is then a Config.
type Job struct {
	Tasks int      // the job's tasks
	Procs int      // the job's processes
	InJob bool     // started by a launcher: run this process's part of the job, start nothing
	Env   orwl.Job // the launcher's job, when InJob
	JSON  bool     // -json: print the result as one JSON object
	Trace string   // -trace FILE: the job's Chrome trace, written by the process of rank 0
	// Checkpoint is -checkpoint and -checkpoint-every, for the examples that take them.
	Checkpoint orwl.Checkpoint

	layout Layout
	fs     *flag.FlagSet
	np     int
}

// Flags registers the shared flags on fs, the example's own FlagSet, for an example laid
// out as l says.
func (j *Job) Flags(fs *flag.FlagSet, l Layout) {
	j.layout, j.fs = l, fs
	grid := ""
	if l.Grid {
		grid = "P*Q of -grid, else "
	}
	fs.Var((*count)(&j.Tasks), "tasks", "tasks of the job, a `count` (default: "+grid+"-np, else the launcher's process count, else "+l.TasksDoc+")")
	procs := "1: every task a goroutine of this process"
	if l.Spread {
		procs = "min(tasks, cores)"
	}
	fs.IntVar(&j.np, "np", 0, "processes started on this machine (default: "+procs+"); ignored under a launcher")
	fs.BoolVar(&j.JSON, "json", false, "print one JSON object instead of the summary and result lines")
	fs.StringVar(&j.Trace, "trace", "", "write the job's trace (Chrome trace event JSON) to this file")
	if l.Checkpoints {
		fs.StringVar(&j.Checkpoint.Dir, "checkpoint", "", `directory of checkpoints ("{rank}" and "{host}" in it become the process's rank and host): the job restarts from the newest complete one there (default $ORWL_CHECKPOINT_DIR)`)
		fs.DurationVar(&j.Checkpoint.Every, "checkpoint-every", 0, "time between two checkpoints (0: $ORWL_CHECKPOINT_EVERY, else 1m)")
	}
}

// Resolve sets Tasks, Procs, InJob and Env once the flags are parsed. gridTasks is the
// tasks of a grid given on the command line (-grid PxQ), 0 without one. The tasks are
// -tasks, else gridTasks, else -np, else the launcher's process count, else the layout's
// default; the processes are the launcher's count, else -np, else the layout's default.
// Mistakes are returned as errors that name the flag.
func (j *Job) Resolve(gridTasks int) error {
	set := Set(j.fs)
	maxTasks := j.layout.MaxTasks
	switch {
	case set["tasks"] && (j.Tasks < 1 || maxTasks > 0 && j.Tasks > maxTasks):
		return fmt.Errorf("-tasks is %d; need 1 to %s", j.Tasks, most(maxTasks))
	case set["np"] && (j.np < 1 || maxTasks > 0 && j.np > maxTasks):
		return fmt.Errorf("-np is %d; need 1 to %s", j.np, most(maxTasks))
	case set["tasks"] && gridTasks > 0 && j.Tasks != gridTasks:
		return fmt.Errorf("-grid has %d tasks but -tasks is %d", gridTasks, j.Tasks)
	}
	env, err := orwl.Environment()
	if err != nil {
		return err
	}
	if j.InJob = env.Launched(); j.InJob {
		j.Env = env
	}
	switch {
	case set["tasks"]:
	case gridTasks > 0:
		j.Tasks = gridTasks
	case set["np"]:
		j.Tasks = j.np
	case j.InJob:
		j.Tasks = env.Size
	default:
		j.Tasks = j.layout.Tasks
	}
	switch {
	case j.InJob:
		j.Procs = env.Size
	case set["np"]:
		j.Procs = j.np
	case j.layout.Spread:
		j.Procs = min(j.Tasks, runtime.NumCPU())
	default:
		j.Procs = 1
	}
	if j.Procs > j.Tasks {
		return fmt.Errorf("%d processes for %d tasks; need at most one process per task", j.Procs, j.Tasks)
	}
	return nil
}

// count is -tasks: an int whose mistakes say that a grid of tasks is another flag.
type count int

func (c *count) String() string { return strconv.Itoa(int(*c)) }
func (c *count) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a count of tasks (a grid of tasks is -grid PxQ)")
	}
	*c = count(n)
	return nil
}

// most spells a limit of tasks for an error.
func most(maxTasks int) string {
	if maxTasks > 0 {
		return fmt.Sprint(maxTasks)
	}
	return "any number"
}

// Start returns Procs, or 1 under a launcher.
func (j *Job) Start() int {
	if j.InJob {
		return 1
	}
	return j.Procs
}

// TasksOnHost is the number of the job's tasks on this host, which share its cores: all
// of them when the command starts the processes itself; under a launcher, this process's
// share of the tasks times the job's processes on this host (Env.LocalSize; every process
// when the launcher does not say), so that one process per node uses the whole node.
func (j *Job) TasksOnHost() int {
	return tasksOnHost(j.InJob, j.Tasks, j.Procs, j.Env.LocalSize)
}

func tasksOnHost(inJob bool, tasks, procs, local int) int {
	if !inJob {
		return tasks
	}
	if local <= 0 || local > procs {
		local = procs
	}
	return max(1, (tasks*local+procs-1)/procs)
}

// Run is the body of the main function of an example called name, with the command line
// args: it parses them with parse, and returns 0 when parse returned flag.ErrHelp,
// ExitUsage after printing parse's error in one line ("name: ..."), the status of the
// processes when the configuration starts more than one, and otherwise compute's status.
func Run[C Config](name string, args []string, stdout, stderr io.Writer,
	parse func(args []string, stderr io.Writer) (C, error), compute func(c C, stdout, stderr io.Writer) int) int {
	c, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, name+":", OneLine(err.Error()))
		return ExitUsage
	case c.Start() > 1:
		return StartProcesses(name, c.Start(), args, stdout, stderr)
	}
	return compute(c, stdout, stderr)
}
