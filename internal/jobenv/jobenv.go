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
// # Order of precedence
//
// Rank and size come from Explicit when it gives a size, else from the first launcher of
// this table whose variables are set, else the process is rank 0 of 1. The file
// launcher_<name>.go reads each launcher's environment (launcher_pmi.go PMI-1/2's and
// PMIx's).
//
//	launcher               set when                    rank, size
//	orwlrun                ORWL_RANK, or ORWL_SIZE     ORWL_RANK, ORWL_SIZE
//	                       without JOB_COMPLETION_INDEX
//	Kubernetes             JOB_COMPLETION_INDEX        JOB_COMPLETION_INDEX, ORWL_SIZE
//	Open MPI               OMPI_COMM_WORLD_RANK        OMPI_COMM_WORLD_RANK, _SIZE
//	PMI-1/2 (Hydra,        PMI_RANK                    PMI_RANK, PMI_SIZE
//	  srun --mpi=pmi2)
//	PMIx                   PMIX_RANK                   PMIX_RANK, the first set of PMIX_SIZE,
//	                                                   PMI_SIZE, OMPI_COMM_WORLD_SIZE and
//	                                                   SLURM_STEP_NUM_TASKS
//	SLURM (a step)         SLURM_PROCID, and           SLURM_PROCID, SLURM_STEP_NUM_TASKS
//	                       SLURM_STEP_ID or _STEPID    (else SLURM_NTASKS)
//
// Each of the other values comes from the first of these that gives it:
//
//	coordinator   Explicit.Coord, ORWL_COORD, rank 0 through the PMI connection that
//	              PMI-1/2, PMIx and SLURM may hand down (PMI_FD or PMI_PORT; not with
//	              ORWL_PMI=off), the launcher: required (Explicit, orwlrun),
//	              <job>-0.<service>:KubernetesPort (Kubernetes), else derived from the job
//	              id (the SLURM node list's first host, or 127.0.0.1 on one host)
//	secret        Explicit.Secret, ORWL_SECRET, rank 0 through the PMI connection, the
//	              launcher: required (Explicit, orwlrun, Kubernetes), else derived from the
//	              job id (weak)
//	listen host   Explicit.Listen, ORWL_LISTEN, 127.0.0.1 when the job is on one host,
//	              else 0.0.0.0
//	inherited     ORWL_COORD_FD on rank 0, unless Explicit.Coord is given
//	listener
//
// A SLURM node list (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else SLURM_NODELIST)
// completes the job under srun (PMI-1/2, PMIx, SLURM): its hosts, this node, and the job
// id SLURM's job and step ids make, which wins over the launcher's.
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
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"

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
	// Bound says that the launcher bound each process to some of the host's cores (Open
	// MPI's binding, SLURM's task affinity, Hydra's -bind-to), so that this process may run
	// on fewer cores than the job's processes on this host share.
	Bound bool
	// Cores is the number of cores the launcher gave the job on this host
	// (SLURM_CPUS_ON_NODE), or 0 when it does not say.
	Cores int
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
