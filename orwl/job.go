package orwl

import (
	"context"
	"fmt"

	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/transport"
)

// Job is this process's place in a job of several processes. Any field left zero is taken
// from the environment (see Config.Job).
type Job struct {
	// Rank and Size: this process is Rank of Size (Size 0: from the environment).
	Rank, Size int
	// Coord is rank 0's coordinator address, host:port.
	Coord string
	// Listen is the host this process accepts its peers on (default: loopback for a job on
	// one host).
	Listen string
	// Secret authenticates the job's connections (default: ORWL_SECRET).
	Secret []byte
	// Launcher is set by Environment: who started this process ("orwlrun", "openmpi",
	// "pmi", "pmix", "slurm", or "single" when nothing did). Run ignores it.
	Launcher string
}

// discover completes explicit with the environment.
func discover(explicit *Job) (jobenv.Job, error) {
	var ex jobenv.Explicit
	if explicit != nil {
		ex = jobenv.Explicit{Rank: explicit.Rank, Size: explicit.Size, Coord: explicit.Coord,
			Listen: explicit.Listen, Secret: explicit.Secret}
	}
	env, err := jobenv.FromEnv(ex)
	if err != nil {
		return jobenv.Job{}, fmt.Errorf("orwl: job: %w", err)
	}
	return env, nil
}

// connect joins this process to the mesh of the job's processes.
func (j *job) connect(ctx context.Context) error {
	ln, err := j.info.CoordListener() // rank 0's listener, inherited from orwlrun
	if err != nil {
		return fmt.Errorf("orwl: job: %w", err)
	}
	cfg := transport.Config{
		Rank: j.rank, Size: j.procs, Coord: j.info.Coord, ListenHost: j.info.Listen,
		Secret: j.info.Secret, Handler: j.node, Logger: j.log, Listener: ln,
	}
	m, err := transport.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("orwl: rank %d of %d: connecting the job: %w", j.rank, j.procs, err)
	}
	j.mesh, j.node.mesh = m, m
	close(j.node.connected)
	if j.rec != nil && j.rank != 0 {
		if err := j.measureClock(ctx); err != nil {
			return fmt.Errorf("orwl: rank %d: measuring the clock offset for the trace: %w", j.rank, err)
		}
	}
	return nil
}
