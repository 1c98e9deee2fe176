package orwl

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orwl-go/orwl/internal/hostcpu"
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
	// "pmi", "pmix", "slurm", "kubernetes", or "single" when nothing did). Run ignores it.
	Launcher string
	// LocalSize is set by Environment: the number of processes of this job on this host, as
	// the launcher reports it (all of them for orwlrun, one per pod in Kubernetes), or 0
	// when it does not say. Run ignores it.
	LocalSize int
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
	// Rank 0's coordinator listener (inherited from orwlrun, or opened here), and the
	// coordinator and secret when the launcher's PMI exchange carries them.
	ln, err := j.info.Rendezvous(ctx, j.log)
	if err != nil {
		return fmt.Errorf("orwl: job: %w", err)
	}
	m, err := transport.New(transport.Config{
		Rank: j.rank, Size: j.procs, Coord: j.info.Coord, ListenHost: j.info.Listen,
		Secret: j.info.Secret, Handler: j.node, Logger: j.log, Listener: ln, JobSpec: j.spec(),
		PeerTimeout: j.peerTimeout, StartTimeout: j.startTimeout, Spin: j.spin(),
		Oversubscribed: j.oversubscribed(),
		ManySchedulers: j.manySchedulers(),
		Idle:           func() bool { return j.det.idle(j.local) },
		NoSharedMemory: noSharedMemory(),
	})
	if err != nil {
		return fmt.Errorf("orwl: rank %d of %d: %w", j.rank, j.procs, err)
	}
	j.mesh = m
	j.node.setMesh(m) // before Start: messages may arrive while it runs
	if err := m.Start(ctx); err != nil {
		return fmt.Errorf("orwl: rank %d of %d: connecting the job: %w", j.rank, j.procs, err)
	}
	if j.rec != nil && j.rank != 0 {
		if err := j.measureClock(ctx); err != nil {
			return fmt.Errorf("orwl: rank %d: measuring the clock offset for the trace: %w", j.rank, err)
		}
	}
	return nil
}

// spec describes the job as every process must see it: the number of tasks, the names of
// the locations and which process runs each task (a hash, past 64 tasks). The mesh compares
// it when it forms.
func (j *job) spec() string {
	var b strings.Builder
	if j.ckpt != nil { // every process takes part in choosing the checkpoint it restarts from
		b.WriteString("checkpoints ")
	}
	fmt.Fprintf(&b, "tasks=%d locations=%s placement=", j.tasks, strings.Join(j.names, ","))
	if j.tasks <= 64 {
		for i, r := range j.owner {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(r))
		}
		return b.String()
	}
	h := fnv.New64a()
	for _, r := range j.owner {
		binary.Write(h, binary.LittleEndian, int64(r))
	}
	fmt.Fprintf(&b, "fnv:%016x", h.Sum64())
	return b.String()
}

// Environment variables for the liveness settings (Config.PeerTimeout, Config.StartTimeout),
// and for how long a connection through shared memory polls for a message before it sleeps
// (see spin), in Go's duration syntax ("5s", "2m", "50us").
const (
	envPeerTimeout  = "ORWL_PEER_TIMEOUT"
	envStartTimeout = "ORWL_START_TIMEOUT"
	envSpin         = "ORWL_SPIN"
	envShm          = "ORWL_SHM" // "off": processes of one host talk over their sockets, and copy data
)

// defaultSpin is how long a connection through shared memory polls for the next message
// before it sleeps.
const defaultSpin = 50 * time.Microsecond

// spin is transport.Config.Spin: ORWL_SPIN when set (0 turns polling off), else defaultSpin.
func (j *job) spin() time.Duration {
	if s, ok := os.LookupEnv(envSpin); ok {
		if d, err := time.ParseDuration(s); err == nil && d >= 0 {
			return d
		}
		j.log.Warn("orwl: "+envSpin+" is not a duration; connections do not poll", "value", s)
		return 0
	}
	return defaultSpin
}

// oversubscribed is transport.Config.Oversubscribed: the job's processes on this host
// outnumber its cores, or the launcher did not say how many share the host, so that a
// polling reader may take a core another process needs unless it gives it away at every
// look.
func (j *job) oversubscribed() bool {
	local := j.info.LocalSize
	return local == 0 || local > j.hostCores()
}

// manySchedulers is transport.Config.ManySchedulers: the job's processes on this host do
// not outnumber its cores, but their schedulers (as many as this one's, GOMAXPROCS) do, as
// when the user sets GOMAXPROCS.
func (j *job) manySchedulers() bool {
	local := j.info.LocalSize
	return !j.oversubscribed() && local*runtime.GOMAXPROCS(0) > j.hostCores()
}

// hostCores is the number of cores the job's processes on this host share: as many as the
// launcher gave the job here, where it says; else those this process may run on, or all the
// host's where the launcher bound each process to some of them (a process bound to one core
// is not a job of two processes on one core).
func (j *job) hostCores() int {
	switch {
	case j.info.Cores > 0:
		return j.info.Cores
	case j.info.Bound:
		return hostcpu.Online()
	}
	return runtime.NumCPU()
}

// duration returns d, or else the duration in the environment variable name, or 0.
func duration(d time.Duration, name string) (time.Duration, error) {
	if d != 0 {
		if d < 0 {
			return 0, fmt.Errorf("orwl: a negative %s: %v", strings.ToLower(name[len("ORWL_"):]), d)
		}
		return d, nil
	}
	s, ok := os.LookupEnv(name)
	if !ok || s == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("orwl: %s=%q: want a positive duration such as 10s", name, s)
	}
	return v, nil
}

// newNode returns the node of a job of several processes (newJob); the job gives it the
// mesh before the mesh starts (setMesh).
func newNode(j *job, log *slog.Logger) *node {
	return &node{
		j:    j,
		log:  log,
		req:  requester{j: j, lost: make([]atomic.Pointer[error], j.procs)},
		own:  owner{j: j, served: make([][]*served, j.procs)},
		wide: newJobWide(j.procs),
	}
}

// setMesh gives the node and its services the mesh, before it starts: messages may arrive
// while it does.
func (n *node) setMesh(m *transport.Mesh) {
	n.mesh, n.req.mesh, n.own.mesh = m, m, m
	for _, t := range n.j.local {
		t.poller = m.Poller()
	}
}

// noSharedMemory reports whether ORWL_SHM is "off": the processes of a host then share no
// memory, neither for their messages nor for the data of locations (buffers.share).
func noSharedMemory() bool { return os.Getenv(envShm) == "off" }
