package orwl

import (
	"log/slog"
	"os"
	"runtime"
)

// envBind set to "none" leaves a process on the cores its launcher gave it (see placeOnCores).
const envBind = "ORWL_BIND"

// placeOnCores gives this process its share of the cores that the job's local processes
// share on this host (cores; see job.hostCores) when the process may run on more: its
// GOMAXPROCS (cores / local, unless GOMAXPROCS is set), since processes that each take
// every core oversubscribe the host, and a hand-off between them then costs far more (idle
// Go schedulers spin for the cores the others need); orwlrun does the same through the
// environment. When the job's processes are at least as many as the cores this process may
// run on and the whole job runs on this host (its rank is then its rank on the host), it
// also binds the process to one of them, as MPI launchers bind a rank to a core: unbound,
// the thread that a message wakes often runs on the core of the process that sent it,
// taking the core from that process, and processes that sleep and wake to hand their
// messages over gather there while another core idles. Consecutive ranks share a core (rank
// r of local to the (r·cores/local)-th), as a block distribution puts them on one node:
// decompositions make neighbouring ranks the ones that exchange, so their messages stay in
// one core's caches and a process that yields its core often hands it to the one it waits
// for (docs/internals.md). ORWL_BIND=none leaves the binding to the launcher, and a process
// that its launcher confined to its share or less (bound to a core of its own) is left as
// it is, GOMAXPROCS included. The returned function ends the binding, which lasts for the
// job only: the process's later jobs and the programs it starts run on the cores it had.
func placeOnCores(rank, local, size, cores int, log *slog.Logger) (unbind func()) {
	if local <= 1 {
		return func() {}
	}
	share := max(1, cores/local)
	if runtime.NumCPU() <= share {
		return func() {}
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(share)
	}
	if local != size || os.Getenv(envBind) == "none" {
		return func() {}
	}
	cpu, unbind, err := bindToCore(rank, local)
	switch {
	case err != nil:
		log.Warn("orwl: cannot bind the process to a core; "+envBind+"=none stops trying", "err", err)
	case cpu >= 0:
		log.Debug("orwl: bound to a core, the host's cores being no more than the job's processes", "cpu", cpu)
	}
	return unbind
}
