// Package jobenv finds which process of which job this is (rank, size, the coordinator's
// address, the address to listen on, the job secret, the processes on this host) from
// explicit values, from the variables set by orwlrun, Open MPI, PMI launchers (MPICH's
// Hydra, srun --mpi=pmi2), PMIx, SLURM or a Kubernetes Indexed Job, or else a job of one
// process; and, when the job connects, settles what the environment leaves open
// (Rendezvous): the coordinator and secret that rank 0 publishes through the launcher's PMI
// key-value exchange, rank 0's coordinator listener.
//
// Discover only reads the environment through the lookup function it is given: it opens no
// socket and starts nothing. Rendezvous opens rank 0's coordinator listener and speaks PMI
// (package internal/pmi) on the connection the launcher handed down. mpirun and srun are
// only process starters here: MPI is never linked, and nothing here modifies the
// environment.
//
// Kubernetes: in a pod of an Indexed Job the rank is JOB_COMPLETION_INDEX (set by
// Kubernetes) and the manifest sets ORWL_SIZE (the Job's completions), ORWL_SERVICE (the
// headless Service that is the pods' subdomain), ORWL_JOB_NAME (the Job's name, from the
// label batch.kubernetes.io/job-name; default: HOSTNAME without its "-<index>" suffix) and
// ORWL_SECRET (from a Kubernetes Secret). The coordinator is then
// <job>-0.<service>:KubernetesPort, the address of pod 0 (ORWL_COORD overrides it), and
// every pod listens on all its interfaces. examples/kubernetes/matmul.yaml is such a
// manifest.
package jobenv

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/orwl-go/orwl/internal/pmi"
)

// Variables set by orwlrun (and honoured under any other starter).
const (
	EnvRank   = "ORWL_RANK"   // rank of this process
	EnvSize   = "ORWL_SIZE"   // number of processes
	EnvCoord  = "ORWL_COORD"  // host:port of rank 0's coordinator
	EnvSecret = "ORWL_SECRET" // job secret (the variable's bytes are the secret)
	EnvListen = "ORWL_LISTEN" // host (address, name, or network interface) every process listens on
	// EnvCoordFD is the number of an inherited file descriptor holding
	// rank 0's already open coordinator listener (set by orwlrun for rank 0
	// so that two jobs never race for a port).
	EnvCoordFD = "ORWL_COORD_FD"
	// EnvPMI chooses the PMI wire protocol under a launcher that hands down a PMI
	// connection (PMI_FD or PMI_PORT): "1", "2", or "off" to do without the exchange.
	// Default: 2 inside a SLURM step, 1 elsewhere (Hydra's default).
	EnvPMI = "ORWL_PMI"
)

// Variables of a Kubernetes Indexed Job: JOB_COMPLETION_INDEX is set by Kubernetes, the
// others by the manifest (and ORWL_SIZE, ORWL_SECRET, ORWL_COORD, ORWL_LISTEN as above).
const (
	EnvIndex   = "JOB_COMPLETION_INDEX" // the pod's index in the Job: its rank
	EnvService = "ORWL_SERVICE"         // the headless Service, the pods' subdomain
	EnvJobName = "ORWL_JOB_NAME"        // the Job's name (default: HOSTNAME without "-<index>")
)

// KubernetesPort is the coordinator's port in a Kubernetes Indexed Job: pod 0 listens on
// it (every pod has its own network namespace, so it cannot be taken by another job).
const KubernetesPort = 7411

// Sources, as reported in Job.Source.
const (
	SourceExplicit   = "explicit"
	SourceOrwl       = "orwlrun"
	SourceOpenMPI    = "openmpi"
	SourcePMI        = "pmi"
	SourcePMIx       = "pmix"
	SourceSLURM      = "slurm"
	SourceKubernetes = "kubernetes"
	SourceSingle     = "single"
)

// Where the coordinator's address comes from, as reported in Job.CoordFrom.
const (
	CoordNone       = ""           // a job of one process: no coordinator
	CoordGiven      = "given"      // Explicit.Coord or ORWL_COORD (set by orwlrun, or by hand)
	CoordPMI        = "pmi"        // rank 0 publishes it through the launcher's PMI exchange
	CoordNodeList   = "nodelist"   // the SLURM node list's first host, a port derived from the job id
	CoordJobID      = "jobid"      // 127.0.0.1 and a port derived from the job id (one host)
	CoordKubernetes = "kubernetes" // <job>-0.<service>:KubernetesPort
)

// Derived coordinator ports lie in [PortBase, PortBase+PortRange), below
// Linux's default ephemeral range (32768-60999) so that they do not collide
// with ports the kernel hands out.
const (
	PortBase  = 12000
	PortRange = 16000
)

// Job describes this process's place in its job.
type Job struct {
	Rank, Size int
	// Coord is rank 0's coordinator address (host:port); empty when Size == 1, and until
	// Rendezvous when CoordFrom is CoordPMI.
	Coord string
	// CoordFrom says where Coord comes from: one of the Coord* constants.
	CoordFrom string
	// Listen is the host to listen on: ORWL_LISTEN when set, else
	// 127.0.0.1 when the job is on one host (the coordinator is on loopback, or the
	// launcher says every process is here), else 0.0.0.0 (every interface; the address
	// advertised to the others is the one this host uses to reach the coordinator).
	Listen string
	// Secret authenticates the job's connections; empty when Size == 1, and nil until
	// Rendezvous when the PMI exchange carries it.
	Secret []byte
	// WeakSecret is true when Secret was derived from the job's id because
	// ORWL_SECRET was not set: anyone who can see the job id (ps, squeue,
	// /proc) can compute it, so it only keeps unrelated jobs apart, it does
	// not keep an attacker out. Export ORWL_SECRET to fix that. Rendezvous warns about it
	// on rank 0.
	WeakSecret bool
	// CoordFD is an inherited file descriptor of rank 0's coordinator
	// listener (ORWL_COORD_FD), or -1.
	CoordFD int
	// Hosts is the expanded SLURM node list, when there is one.
	Hosts []string
	// Node is this host's name as the launcher knows it (SLURMD_NODENAME), or "".
	Node string
	// LocalSize is the number of processes of this job on this host: as the launcher says
	// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, PMIX_LOCAL_SIZE,
	// SLURM_STEP_TASKS_PER_NODE), Size for a job on one host, 1 in a Kubernetes pod, 0 when
	// unknown.
	LocalSize int
	// JobID is the launcher's job id, which derived ports and secrets hash, or "".
	JobID string
	// PMI, when not nil, is the launcher's PMI connection, through which Rendezvous
	// settles what the environment left open: the coordinator (Coord is then empty) and
	// the secret (Secret is then nil).
	PMI *pmi.Endpoint
	// Source says where Rank and Size came from: one of the Source*
	// constants.
	Source string
}

// Explicit holds values given by the program; they win over the
// environment. Size == 0 means "rank and size not given"; empty strings and
// a nil Secret mean "not given" for the other fields.
type Explicit struct {
	Rank, Size    int
	Coord, Listen string
	Secret        []byte
}

// LookupFunc looks up an environment variable, like os.LookupEnv.
type LookupFunc func(string) (string, bool)

// FromEnv is Discover with the process environment.
func FromEnv(ex Explicit) (Job, error) { return Discover(ex, os.LookupEnv) }

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
func Discover(ex Explicit, lookup LookupFunc) (Job, error) {
	env := envReader{lookup: lookup}
	j := Job{CoordFD: -1}
	var err error
	var localVar string // the starter's count of ranks on this host
	switch {
	case ex.Size != 0:
		j.Source = SourceExplicit
		j.Rank, j.Size = ex.Rank, ex.Size
		if err = check(j.Rank, j.Size, "Explicit.Rank", "Explicit.Size"); err != nil {
			return Job{}, err
		}
	case env.has(EnvRank):
		j.Source = SourceOrwl
		if j.Rank, j.Size, err = env.rankSize(EnvRank, EnvSize); err != nil {
			return Job{}, err
		}
	case env.has(EnvIndex):
		j.Source = SourceKubernetes
		if !env.has(EnvSize) {
			return Job{}, fmt.Errorf("jobenv: %s is set (a pod of a Kubernetes Indexed Job) but %s is not: set it to the Job's completions in the manifest", EnvIndex, EnvSize)
		}
		if j.Rank, j.Size, err = env.rankSize(EnvIndex, EnvSize); err != nil {
			return Job{}, err
		}
		j.LocalSize = 1
	case env.has(EnvSize):
		j.Source = SourceOrwl
		if j.Rank, j.Size, err = env.rankSize(EnvRank, EnvSize); err != nil {
			return Job{}, err
		}
	case env.has("OMPI_COMM_WORLD_RANK"):
		j.Source = SourceOpenMPI
		if j.Rank, j.Size, err = env.rankSize("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"); err != nil {
			return Job{}, err
		}
		j.JobID = env.first("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")
		localVar = "OMPI_COMM_WORLD_LOCAL_SIZE"
	case env.has("PMI_RANK"):
		j.Source = SourcePMI
		if j.Rank, j.Size, err = env.rankSize("PMI_RANK", "PMI_SIZE"); err != nil {
			return Job{}, err
		}
		j.JobID = env.first("PMI_JOBID", "PMIX_NAMESPACE", "PMI_KVSNAME", "PMI_PORT")
		localVar = "MPI_LOCALNRANKS"
	case env.has("PMIX_RANK"):
		j.Source = SourcePMIx
		sizeVar := cmp.Or(env.firstSet("PMIX_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"), "PMIX_SIZE")
		if j.Rank, j.Size, err = env.rankSize("PMIX_RANK", sizeVar); err != nil {
			return Job{}, err
		}
		j.JobID = env.first("PMIX_NAMESPACE", "SLURM_JOB_ID")
		localVar = "PMIX_LOCAL_SIZE"
	case env.has("SLURM_PROCID") && (env.has("SLURM_STEP_ID") || env.has("SLURM_STEPID")):
		j.Source = SourceSLURM
		sizeVar := cmp.Or(env.firstSet("SLURM_STEP_NUM_TASKS"), "SLURM_NTASKS")
		if j.Rank, j.Size, err = env.rankSize("SLURM_PROCID", sizeVar); err != nil {
			return Job{}, err
		}
	default:
		j.Source = SourceSingle
		j.Rank, j.Size = 0, 1
	}
	localOnly := true // every rank is on this host, as far as the launcher says
	if localVar != "" {
		local, ok, err := env.int(localVar)
		switch {
		case err != nil:
			return Job{}, err
		case ok && local < 1:
			return Job{}, fmt.Errorf("jobenv: %s=%d: want at least 1", localVar, local)
		case ok:
			j.LocalSize = min(local, j.Size)
		}
		localOnly = !ok || local >= j.Size
	}

	// A SLURM node list, whoever started us (srun --mpi=pmix sets PMIX_*, --mpi=pmi2 PMI_*).
	slurmStep := env.has("SLURM_STEP_ID") || env.has("SLURM_STEPID")
	nodeVar := env.firstSet("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if nodeVar != "" && (j.Source == SourceSLURM || j.Source == SourcePMIx || j.Source == SourcePMI) {
		s, _ := lookup(nodeVar)
		if j.Hosts, err = ExpandHostlist(s); err != nil {
			return Job{}, fmt.Errorf("jobenv: %s=%q: %w", nodeVar, s, err)
		}
		localOnly = len(j.Hosts) <= 1
		j.Node = env.first("SLURMD_NODENAME")
		jid := env.first("SLURM_JOB_ID", "SLURM_JOBID")
		step := env.first("SLURM_STEP_ID", "SLURM_STEPID")
		if jid != "" {
			j.JobID = "slurm:" + jid + "." + step
		}
		if j.LocalSize == 0 && slurmStep {
			if j.LocalSize, err = slurmLocalSize(env, j.Hosts, j.Node); err != nil {
				return Job{}, err
			}
		}
	}

	if s, ok := lookup(EnvCoordFD); ok && ex.Coord == "" && j.Rank == 0 {
		fd, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || fd < 0 {
			return Job{}, fmt.Errorf("jobenv: %s=%q: not a file descriptor number", EnvCoordFD, s)
		}
		j.CoordFD = fd
	}

	if j.Size == 1 {
		j.Listen = cmp.Or(ex.Listen, env.first(EnvListen), "127.0.0.1")
		j.Coord, j.Secret = ex.Coord, ex.Secret
		j.LocalSize = 1
		if j.Coord != "" {
			j.CoordFrom = CoordGiven
		}
		return j, nil
	}

	// The launcher's PMI connection, when the environment leaves the coordinator or the
	// secret open.
	coordGiven := ex.Coord != "" || env.first(EnvCoord) != ""
	secretGiven := ex.Secret != nil || env.first(EnvSecret) != ""
	if (!coordGiven || !secretGiven) && (j.Source == SourcePMI || j.Source == SourceSLURM || j.Source == SourcePMIx) {
		version := 1
		if slurmStep {
			version = 2
		}
		switch v := env.first(EnvPMI); v {
		case "":
		case "1", "2":
			version, _ = strconv.Atoi(v)
		case "off":
			version = 0
		default:
			return Job{}, fmt.Errorf("jobenv: %s=%q: want 1, 2 or off", EnvPMI, v)
		}
		if version != 0 {
			e, ok, err := pmi.FromEnv(lookup, version)
			if err != nil {
				return Job{}, fmt.Errorf("jobenv: %w", err)
			}
			if ok {
				j.PMI = &e
			}
		}
	}

	// Coordinator.
	coordVar := ""
	switch c := env.first(EnvCoord); {
	case ex.Coord != "":
		j.Coord, coordVar, j.CoordFrom = ex.Coord, "Explicit.Coord", CoordGiven
	case c != "":
		j.Coord, coordVar, j.CoordFrom = c, EnvCoord, CoordGiven
	case j.Source == SourceOrwl || j.Source == SourceExplicit:
		return Job{}, fmt.Errorf("jobenv: %s is required for a job of %d processes (rank %d, from %s)", EnvCoord, j.Size, j.Rank, j.Source)
	case j.PMI != nil:
		j.CoordFrom = CoordPMI
	case j.Source == SourceKubernetes:
		service := env.first(EnvService)
		if service == "" {
			return Job{}, fmt.Errorf("jobenv: a Kubernetes Indexed Job (%s is set) needs %s, the headless Service that is the pods' subdomain (or %s=host:port)", EnvIndex, EnvService, EnvCoord)
		}
		name := env.first(EnvJobName)
		if name == "" {
			host, suffix := env.first("HOSTNAME"), "-"+strconv.Itoa(j.Rank)
			if !strings.HasSuffix(host, suffix) || len(host) == len(suffix) {
				return Job{}, fmt.Errorf("jobenv: a Kubernetes Indexed Job (%s is set) needs %s, the Job's name (HOSTNAME=%q does not end in %q)", EnvIndex, EnvJobName, host, suffix)
			}
			name = strings.TrimSuffix(host, suffix)
		}
		j.Coord = net.JoinHostPort(name+"-0."+service, strconv.Itoa(KubernetesPort))
		coordVar, j.CoordFrom = EnvJobName+" and "+EnvService, CoordKubernetes
	case j.JobID == "":
		return Job{}, fmt.Errorf("jobenv: %s job of %d processes has no job id to derive the coordinator from; export %s=host:port and %s, or start it with a launcher that hands down a PMI connection (mpiexec.hydra, srun --mpi=pmi2)", j.Source, j.Size, EnvCoord, EnvSecret)
	case len(j.Hosts) > 1:
		j.Coord, coordVar, j.CoordFrom = net.JoinHostPort(j.Hosts[0], strconv.Itoa(DerivedPort(j.JobID))), "SLURM node list", CoordNodeList
	case localOnly:
		j.Coord, coordVar, j.CoordFrom = net.JoinHostPort("127.0.0.1", strconv.Itoa(DerivedPort(j.JobID))), "job id", CoordJobID
	default:
		return Job{}, fmt.Errorf("jobenv: %s job of %d processes spans several hosts; export %s=host:port (rank 0's host) and %s", j.Source, j.Size, EnvCoord, EnvSecret)
	}
	loopback := false
	if j.CoordFrom != CoordPMI {
		host, port, err := net.SplitHostPort(j.Coord)
		if err != nil {
			return Job{}, fmt.Errorf("jobenv: coordinator %q (from %s): %w", j.Coord, coordVar, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return Job{}, fmt.Errorf("jobenv: coordinator %q (from %s): bad port", j.Coord, coordVar)
		}
		loopback = isLoopback(host)
	} else {
		loopback = localOnly
	}
	if j.LocalSize == 0 && loopback {
		j.LocalSize = j.Size
	}

	// Listen host.
	defaultListen := "0.0.0.0"
	if loopback {
		defaultListen = "127.0.0.1"
	}
	j.Listen = cmp.Or(ex.Listen, env.first(EnvListen), defaultListen)

	// Secret.
	switch s := env.first(EnvSecret); {
	case ex.Secret != nil:
		j.Secret = ex.Secret
	case s != "":
		j.Secret = []byte(s)
	case j.PMI != nil:
		// rank 0 draws one and publishes it at Rendezvous
	case j.Source == SourceKubernetes:
		return Job{}, fmt.Errorf("jobenv: %s is required in a Kubernetes Indexed Job: mount a Kubernetes Secret as the variable (see examples/kubernetes/matmul.yaml)", EnvSecret)
	case j.JobID != "":
		sum := sha256.Sum256([]byte("orwl-go derived job secret\x00" + j.Source + "\x00" + j.JobID))
		j.Secret, j.WeakSecret = sum[:], true
	default:
		return Job{}, fmt.Errorf("jobenv: %s is required for a job of %d processes (rank %d, from %s)", EnvSecret, j.Size, j.Rank, j.Source)
	}
	return j, nil
}

// slurmLocalSize returns the number of tasks of this step on this node, from
// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": two tasks on each of the first three nodes, one on
// the fourth) and this node's index (SLURM_NODEID, else Node's place in hosts), or 0 when
// they do not say.
func slurmLocalSize(env envReader, hosts []string, node string) (int, error) {
	v := env.firstSet("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	if v == "" {
		return 0, nil
	}
	s, _ := env.lookup(v)
	var counts []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 && strings.HasPrefix(part[i:], "(x") && strings.HasSuffix(part, ")") {
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(n)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 0 || r < 1 || len(counts)+r > maxHosts {
			return 0, fmt.Errorf("jobenv: %s=%q: want counts such as 2(x3),1", v, s)
		}
		for range r {
			counts = append(counts, c)
		}
	}
	idx, ok, err := env.int("SLURM_NODEID")
	if err != nil {
		return 0, err
	}
	if !ok {
		idx = -1
		for i, h := range hosts {
			if node != "" && h == node {
				idx = i
			}
		}
	}
	switch {
	case idx >= 0 && idx < len(counts):
		return counts[idx], nil
	case len(counts) > 0 && !slicesDiffer(counts):
		return counts[0], nil
	}
	return 0, nil
}

func slicesDiffer(c []int) bool {
	for _, x := range c {
		if x != c[0] {
			return true
		}
	}
	return false
}

// DerivedPort maps a job id to a port in [PortBase, PortBase+PortRange).
// Every process of a job derives the same one; two jobs collide with
// probability 1/PortRange, in which case the second fails to listen (and
// ORWL_COORD fixes it).
func DerivedPort(jobID string) int {
	sum := sha256.Sum256([]byte(jobID))
	return PortBase + int(binary.BigEndian.Uint32(sum[:])%PortRange)
}

// CoordListener returns the coordinator listener inherited through
// j.CoordFD, or nil when there is none. The caller owns it.
func (j Job) CoordListener() (net.Listener, error) {
	if j.CoordFD < 0 {
		return nil, nil
	}
	f := os.NewFile(uintptr(j.CoordFD), "orwl-coordinator")
	if f == nil {
		return nil, fmt.Errorf("jobenv: %s=%d: not an open file descriptor", EnvCoordFD, j.CoordFD)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("jobenv: %s=%d: %w", EnvCoordFD, j.CoordFD, err)
	}
	return ln, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func check(rank, size int, rankVar, sizeVar string) error {
	if size < 1 {
		return fmt.Errorf("jobenv: %s=%d: the job size must be at least 1", sizeVar, size)
	}
	if rank < 0 || rank >= size {
		return fmt.Errorf("jobenv: %s=%d must be in [0, %s=%d)", rankVar, rank, sizeVar, size)
	}
	return nil
}

type envReader struct{ lookup LookupFunc }

func (e envReader) has(v string) bool {
	_, ok := e.lookup(v)
	return ok
}

// firstSet returns the name of the first of vars that is set, or "".
func (e envReader) firstSet(vars ...string) string {
	for _, v := range vars {
		if e.has(v) {
			return v
		}
	}
	return ""
}

// first returns the value of the first of vars that is set and not empty,
// or "".
func (e envReader) first(vars ...string) string {
	for _, v := range vars {
		if s, ok := e.lookup(v); ok && s != "" {
			return s
		}
	}
	return ""
}

// int returns the integer value of v, whether it is set, and an error
// naming v when it is set but not an integer.
func (e envReader) int(v string) (int, bool, error) {
	s, ok := e.lookup(v)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, true, fmt.Errorf("jobenv: %s=%q: not an integer", v, s)
	}
	return n, true, nil
}

func (e envReader) rankSize(rankVar, sizeVar string) (int, int, error) {
	rank, ok, err := e.int(rankVar)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("jobenv: %s is set but %s is not", sizeVar, rankVar)
	}
	size, ok, err := e.int(sizeVar)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("jobenv: %s is set but %s is not", rankVar, sizeVar)
	}
	return rank, size, check(rank, size, rankVar, sizeVar)
}

// errHostlist is wrapped by every hostlist syntax error.
var errHostlist = errors.New("malformed host list")

// maxHosts bounds the expansion of a host list.
const maxHosts = 1 << 20

// ExpandHostlist expands a SLURM compressed host list such as
// "node[01-04,07],gpu[1-2]" into host names, in order: ranges keep the
// zero padding of their lower bound, several bracket groups in one name
// multiply ("r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2), and surrounding
// spaces are ignored. An empty list gives no hosts.
func ExpandHostlist(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, item := range splitTop(s) {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%w: empty host name", errHostlist)
		}
		var err error
		if out, err = expandOne(out, "", item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitTop splits s at commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandOne appends prefix+expansions of item to out.
func expandOne(out []string, prefix, item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.IndexByte(item, ']') >= 0 {
			return nil, fmt.Errorf("%w: unbalanced ']' in %q", errHostlist, item)
		}
		if len(out) >= maxHosts {
			return nil, fmt.Errorf("%w: more than %d hosts", errHostlist, maxHosts)
		}
		return append(out, prefix+item), nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced '[' in %q", errHostlist, item)
	}
	end += open
	head, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.IndexByte(head, ']') >= 0 || strings.IndexByte(body, '[') >= 0 {
		return nil, fmt.Errorf("%w: misplaced bracket in %q", errHostlist, item)
	}
	if body == "" {
		return nil, fmt.Errorf("%w: empty brackets in %q", errHostlist, item)
	}
	for _, r := range strings.Split(body, ",") {
		r = strings.TrimSpace(r)
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if lo == "" || hi == "" || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: bad range %q in %q", errHostlist, r, item)
		}
		if a > b {
			return nil, fmt.Errorf("%w: range %q in %q goes down", errHostlist, r, item)
		}
		if b-a >= maxHosts {
			return nil, fmt.Errorf("%w: more than %d hosts", errHostlist, maxHosts)
		}
		for n := a; n <= b; n++ {
			num := strconv.FormatUint(n, 10)
			if pad := len(lo) - len(num); pad > 0 {
				num = strings.Repeat("0", pad) + num
			}
			var err error
			if out, err = expandOne(out, prefix+head+num, rest); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
