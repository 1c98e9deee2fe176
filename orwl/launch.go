package orwl

import (
	"io"
	"os"
	"time"

	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/internal/launch"
)

// Launch starts a program as several processes of one job on this machine, as
// `orwlrun -np N` does: a program that calls Run can start itself this way when no launcher
// started it (see Environment).
type Launch struct {
	Procs int      // number of processes, at least 1
	Argv  []string // the program and its arguments
	Env   []string // added to this process's environment for every process
	// Stdout and Stderr receive the processes' lines prefixed with "[rank] " (nil discards
	// them); PlainStdout passes standard output on without the prefix.
	Stdout, Stderr io.Writer
	PlainStdout    bool
	// Signals, when not nil, are forwarded to every process.
	Signals <-chan os.Signal
	// Grace is the time between SIGTERM and SIGKILL when a failed process stops the others:
	// 0 means 5 seconds, a negative value kills at once.
	Grace time.Duration
}

// Run starts the processes and waits for all of them. It returns the exit status of the
// first that failed (128+signal for one killed by a signal), or 0. The processes get the
// job's place (rank, size, coordinator, a fresh secret) in ORWL_* variables and share this
// machine's cores (GOMAXPROCS = cores / processes unless set); rank 0 inherits the
// coordinator's listening socket, so jobs never race for a port.
func (l Launch) Run() int {
	return launch.Run(launch.Options{
		Procs: l.Procs, Argv: l.Argv, Env: l.Env, Stdout: l.Stdout, Stderr: l.Stderr,
		PlainStdout: l.PlainStdout, Signals: l.Signals, Grace: l.Grace,
	})
}

// Environment returns this process's place in a job as the environment describes it
// (orwlrun, mpirun, srun, PMI, Kubernetes: see Config.Job), without connecting to anything.
// Launcher says who started the process; it is "single" for a process started alone, which
// Run treats as a whole job of one process. LocalSize counts the job's processes on this
// host, for sharing its cores. Under a launcher that hands down a PMI connection (Hydra,
// srun --mpi=pmi2), Coord and Secret are empty unless set by hand: rank 0 publishes them
// through the launcher when Run connects.
func Environment() (Job, error) {
	info, err := discover(nil)
	if err != nil {
		return Job{}, err
	}
	return Job{Rank: info.Rank, Size: info.Size, Coord: info.Coord, Listen: info.Listen,
		Secret: info.Secret, Launcher: info.Source, LocalSize: info.LocalSize}, nil
}

// Launched reports whether a launcher started this process as part of a job (Launcher is
// not "single").
func (j Job) Launched() bool { return j.Launcher != "" && j.Launcher != jobenv.SourceSingle }
