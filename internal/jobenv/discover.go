package jobenv

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Discover determines the job from ex and the variables lookup returns, in
// this order of precedence for rank and size: ex; ORWL_RANK/ORWL_SIZE; a Kubernetes
// Indexed Job (JOB_COMPLETION_INDEX and ORWL_SIZE); Open MPI
// (OMPI_COMM_WORLD_RANK/_SIZE); PMI (PMI_RANK/PMI_SIZE); PMIx
// (PMIX_RANK, size from PMIX_SIZE, PMI_SIZE, OMPI_COMM_WORLD_SIZE or
// SLURM_STEP_NUM_TASKS); SLURM (SLURM_PROCID and SLURM_STEP_NUM_TASKS or
// SLURM_NTASKS, only inside a step, i.e. with SLURM_STEP_ID set); otherwise
// rank 0 of 1.
//
// The coordinator is ex.Coord, else ORWL_COORD; else, under a launcher that hands down a
// PMI connection (PMI_FD or PMI_PORT: Hydra, srun --mpi=pmi2), the address rank 0
// publishes through it at Rendezvous (ORWL_PMI=off does without); else <job>-0.<service>
// in a Kubernetes Indexed Job; else derived: for SLURM the
// first host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) and a port
// derived from the job and step ids; for Open MPI, PMI and PMIx when every
// rank is on this host, 127.0.0.1 and a port derived from the job's
// namespace or id. A multi-host job without a way to derive it is an error
// asking for ORWL_COORD. The secret is ex.Secret, else ORWL_SECRET, else one rank 0
// draws at random and publishes through PMI, else (not in Kubernetes, where it is
// required) derived from the job id (Job.WeakSecret is then true).
//
// Errors name the variable at fault, for example a rank not below the size.
//
// The package documentation's table sets this order out; each launcher is in a file of
// its own (launcher_*.go).
func Discover(ex Explicit, lookup LookupFunc) (Job, error) {
	env := envReader{lookup: lookup}
	l := pick(ex, env)
	p, err := l.read(env)
	if err != nil {
		return Job{}, err
	}
	p.job.Source = l.source
	if p.job.CoordFD, err = coordFD(ex, env, p.job.Rank); err != nil {
		return Job{}, err
	}
	if p.job.Size == 1 {
		return alone(ex, env, p.job), nil
	}
	return complete(ex, env, l, p)
}

// coordFD returns the descriptor of the coordinator listener that rank 0 inherits
// (ORWL_COORD_FD, unless Explicit.Coord names another coordinator), or -1.
func coordFD(ex Explicit, env envReader, rank int) (int, error) {
	s, ok := env.lookup(EnvCoordFD)
	if !ok || ex.Coord != "" || rank != 0 {
		return -1, nil
	}
	fd, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || fd < 0 {
		return -1, fmt.Errorf("jobenv: %s=%q: not a file descriptor number", EnvCoordFD, s)
	}
	return fd, nil
}

// alone completes the job of one process j: no coordinator (unless given), no secret
// (unless given), listening on loopback (unless told otherwise).
func alone(ex Explicit, env envReader, j Job) Job {
	j.Listen = cmp.Or(ex.Listen, env.first(EnvListen), "127.0.0.1")
	j.Coord, j.Secret = ex.Coord, ex.Secret
	j.LocalSize = 1
	if j.Coord != "" {
		j.CoordFrom = CoordGiven
	}
	return j
}

// complete settles the coordinator, the listen host and the secret of a job of several
// processes that launcher l placed at p: each from Explicit, else its variable, else the
// launcher's PMI connection, else what l derives.
func complete(ex Explicit, env envReader, l launcher, p placement) (Job, error) {
	var err error
	coordGiven := ex.Coord != "" || env.first(EnvCoord) != ""
	secretGiven := ex.Secret != nil || env.first(EnvSecret) != ""
	if l.pmi && (!coordGiven || !secretGiven) {
		if p.job.PMI, err = pmiEndpoint(env); err != nil {
			return Job{}, err
		}
	}
	j := p.job
	c, err := coordOf(ex, env, l, p)
	if err != nil {
		return Job{}, err
	}
	j.Coord, j.CoordFrom = c.addr, c.from
	loopback, err := onLoopback(c, p.localOnly)
	if err != nil {
		return Job{}, err
	}
	if j.LocalSize == 0 && loopback {
		j.LocalSize = j.Size
	}
	defaultListen := "0.0.0.0"
	if loopback {
		defaultListen = "127.0.0.1"
	}
	j.Listen = cmp.Or(ex.Listen, env.first(EnvListen), defaultListen)
	switch s := env.first(EnvSecret); {
	case ex.Secret != nil:
		j.Secret = ex.Secret
	case s != "":
		j.Secret = []byte(s)
	case j.PMI != nil:
		// rank 0 draws one and publishes it at Rendezvous
	default:
		if j.Secret, j.WeakSecret, err = l.secret(j); err != nil {
			return Job{}, err
		}
	}
	return j, nil
}

// coordOf returns the coordinator: Explicit.Coord, else ORWL_COORD, else the one rank 0
// publishes through the PMI connection (at Rendezvous), else what l derives.
func coordOf(ex Explicit, env envReader, l launcher, p placement) (coordinator, error) {
	switch c := env.first(EnvCoord); {
	case ex.Coord != "":
		return coordinator{ex.Coord, "Explicit.Coord", CoordGiven}, nil
	case c != "":
		return coordinator{c, EnvCoord, CoordGiven}, nil
	case p.job.PMI != nil:
		return coordinator{from: CoordPMI}, nil
	}
	return l.coord(env, p)
}

// onLoopback checks the coordinator's address and reports whether it is on loopback, or,
// when the PMI exchange will settle it, whether the launcher says every process is on
// this host.
func onLoopback(c coordinator, localOnly bool) (bool, error) {
	if c.from == CoordPMI {
		return localOnly, nil
	}
	host, port, err := net.SplitHostPort(c.addr)
	if err != nil {
		return false, fmt.Errorf("jobenv: coordinator %q (from %s): %w", c.addr, c.what, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return false, fmt.Errorf("jobenv: coordinator %q (from %s): bad port", c.addr, c.what)
	}
	return isLoopback(host), nil
}
