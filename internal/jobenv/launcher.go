package jobenv

import (
	"crypto/sha256"
	"fmt"
	"net"
	"strconv"
)

// A launcher is what Discover knows of one process starter's environment: how to tell it
// is there, what it says about this process, and what it leaves to derive. Each one lives
// in a file of its own (launcher_*.go); launchers lists them in their order of precedence.
type launcher struct {
	source string                                 // Job.Source
	detect func(env envReader) bool               // whether the environment is this launcher's
	read   func(env envReader) (placement, error) // the process's place, as the launcher says it
	// pmi is true for a launcher that may hand down a PMI connection (PMI_FD or PMI_PORT),
	// through which rank 0 publishes what the environment leaves open (the coordinator, the
	// secret).
	pmi bool
	// coord gives the coordinator of a job of several processes when neither
	// Explicit.Coord nor ORWL_COORD does and no PMI connection carries it.
	coord func(env envReader, p placement) (coordinator, error)
	// secret gives the secret of a job of several processes when neither Explicit.Secret
	// nor ORWL_SECRET does and no PMI connection carries it.
	secret func(j Job) (secret []byte, weak bool, err error)
}

// launchers are the launchers Discover knows, in their order of precedence: the first
// whose detect is true places the process (unless Explicit does).
var launchers = []launcher{orwlrun, kubernetes, openMPI, pmiLauncher, pmixLauncher, slurm}

// pick returns the launcher that places this process: Explicit when it gives a size, else
// the first of launchers that detects its environment, else a job of one process.
func pick(ex Explicit, env envReader) launcher {
	if ex.Size != 0 {
		return explicit(ex)
	}
	for _, l := range launchers {
		if l.detect(env) {
			return l
		}
	}
	return single
}

// placement is what a launcher's environment says about this process.
type placement struct {
	// job holds Rank and Size, and where the launcher says them JobID, LocalSize, Hosts
	// and Node.
	job Job
	// localOnly is true when every process of the job is on this host, as far as the
	// launcher says.
	localOnly bool
}

// coordinator is the coordinator's address and where it comes from.
type coordinator struct {
	addr string
	what string // what the address comes from, for errors: a variable's name
	from string // a Coord* constant
}

// readRankSize places the process at the rank and size that the variables rankVar and
// sizeVar hold.
func readRankSize(env envReader, rankVar, sizeVar string) (placement, error) {
	rank, size, err := env.rankSize(rankVar, sizeVar)
	return placement{job: Job{Rank: rank, Size: size}, localOnly: true}, err
}

// readStarter places the process as an MPI starter's variables say: the rank and size
// (rankVar, sizeVar), the job id (the first of jobIDVars set and not empty) and the number
// of the job's processes on this host (localVar, when set).
func readStarter(env envReader, rankVar, sizeVar, localVar string, jobIDVars ...string) (placement, error) {
	p, err := readRankSize(env, rankVar, sizeVar)
	if err != nil {
		return placement{}, err
	}
	p.job.JobID = env.first(jobIDVars...)
	local, ok, err := env.int(localVar)
	switch {
	case err != nil:
		return placement{}, err
	case ok && local < 1:
		return placement{}, fmt.Errorf("jobenv: %s=%d: want at least 1", localVar, local)
	case ok:
		p.job.LocalSize = min(local, p.job.Size)
	}
	p.localOnly = !ok || local >= p.job.Size
	return p, nil
}

// explicit is the launcher of the values a program gives (ex.Size > 0): they need no
// environment, and the coordinator and the secret must be given too.
func explicit(ex Explicit) launcher {
	return launcher{
		source: SourceExplicit,
		read: func(envReader) (placement, error) {
			if err := check(ex.Rank, ex.Size, "Explicit.Rank", "Explicit.Size"); err != nil {
				return placement{}, err
			}
			return placement{job: Job{Rank: ex.Rank, Size: ex.Size}, localOnly: true}, nil
		},
		coord:  requireCoord,
		secret: requireSecret,
	}
}

// single is a job of one process, when nothing else places it: it has no coordinator and
// no secret.
var single = launcher{
	source: SourceSingle,
	read: func(envReader) (placement, error) {
		return placement{job: Job{Rank: 0, Size: 1}, localOnly: true}, nil
	},
	coord:  requireCoord,
	secret: requireSecret,
}

// requireCoord is the coordinator of a launcher that cannot derive one: an error asking
// for ORWL_COORD.
func requireCoord(_ envReader, p placement) (coordinator, error) {
	j := p.job
	return coordinator{}, fmt.Errorf("jobenv: %s is required for a job of %d processes (rank %d, from %s)", EnvCoord, j.Size, j.Rank, j.Source)
}

// requireSecret is the secret of a launcher that cannot derive one: an error asking for
// ORWL_SECRET.
func requireSecret(j Job) ([]byte, bool, error) {
	return nil, false, fmt.Errorf("jobenv: %s is required for a job of %d processes (rank %d, from %s)", EnvSecret, j.Size, j.Rank, j.Source)
}

// derivedCoord is the coordinator derived from the launcher's job id: on the SLURM node
// list's first host when the job spans several, on 127.0.0.1 when every process is on
// this host, at a port derived from the job id.
func derivedCoord(_ envReader, p placement) (coordinator, error) {
	j := p.job
	switch {
	case j.JobID == "":
		return coordinator{}, fmt.Errorf("jobenv: %s job of %d processes has no job id to derive the coordinator from; export %s=host:port and %s, or start it with a launcher that hands down a PMI connection (mpiexec.hydra, srun --mpi=pmi2)", j.Source, j.Size, EnvCoord, EnvSecret)
	case len(j.Hosts) > 1:
		return coordinator{net.JoinHostPort(j.Hosts[0], strconv.Itoa(DerivedPort(j.JobID))), "SLURM node list", CoordNodeList}, nil
	case p.localOnly:
		return coordinator{net.JoinHostPort("127.0.0.1", strconv.Itoa(DerivedPort(j.JobID))), "job id", CoordJobID}, nil
	}
	return coordinator{}, fmt.Errorf("jobenv: %s job of %d processes spans several hosts; export %s=host:port (rank 0's host) and %s", j.Source, j.Size, EnvCoord, EnvSecret)
}

// derivedSecret is the secret derived from the launcher's job id (weak: anyone who sees
// the job id can compute it), or, without a job id, an error asking for ORWL_SECRET.
func derivedSecret(j Job) ([]byte, bool, error) {
	if j.JobID == "" {
		return requireSecret(j)
	}
	sum := sha256.Sum256([]byte("orwl-go derived job secret\x00" + j.Source + "\x00" + j.JobID))
	return sum[:], true, nil
}
