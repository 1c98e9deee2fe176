package jobenv

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/orwl-go/orwl/internal/pmi"
)

// pmiLauncher is a PMI-1 or PMI-2 launcher: MPICH's Hydra (mpiexec), srun --mpi=pmi2.
// PMI_RANK and PMI_SIZE place the process, MPI_LOCALNRANKS counts the ranks on this host,
// and the connection it hands down (PMI_FD or PMI_PORT) carries the coordinator and the
// secret. Hydra says that it bound each rank to cores of its own (-bind-to, other than
// none) with HYDRA_USER_PROVIDED_BINDING=1, which MPICH itself reads to that end. Under
// srun, SLURM's node list and cores say more (readSlurmNodes, readSlurmCores).
var pmiLauncher = srunLauncher(SourcePMI,
	func(env envReader) bool { return env.has("PMI_RANK") },
	func(env envReader) (placement, error) {
		p, err := readStarter(env, "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "PMI_JOBID", "PMIX_NAMESPACE", "PMI_KVSNAME", "PMI_PORT")
		if err == nil {
			p.job.Bound = env.first("HYDRA_USER_PROVIDED_BINDING") == "1"
		}
		return p, err
	})

// pmixLauncher is a PMIx launcher (srun --mpi=pmix, PRRTE): PMIX_RANK, the size from the
// first of PMIX_SIZE, PMI_SIZE, OMPI_COMM_WORLD_SIZE and SLURM_STEP_NUM_TASKS that is set,
// PMIX_LOCAL_SIZE ranks on this host. Under srun, SLURM's node list says more
// (readSlurmNodes).
var pmixLauncher = srunLauncher(SourcePMIx,
	func(env envReader) bool { return env.has("PMIX_RANK") },
	func(env envReader) (placement, error) {
		sizeVar := cmp.Or(env.firstSet("PMIX_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"), "PMIX_SIZE")
		return readStarter(env, "PMIX_RANK", sizeVar, "PMIX_LOCAL_SIZE", "PMIX_NAMESPACE", "SLURM_JOB_ID")
	})

// pmiEndpoint returns the PMI connection the launcher hands down (PMI_FD or PMI_PORT), in
// the wire protocol ORWL_PMI asks for (default: 2 inside a SLURM step, 1 elsewhere), or
// nil when there is none or ORWL_PMI=off.
func pmiEndpoint(env envReader) (*pmi.Endpoint, error) {
	version := 1
	if inSlurmStep(env) {
		version = 2
	}
	switch v := env.first(EnvPMI); v {
	case "":
	case "1", "2":
		version, _ = strconv.Atoi(v)
	case "off":
		return nil, nil
	default:
		return nil, fmt.Errorf("jobenv: %s=%q: want 1, 2 or off", EnvPMI, v)
	}
	e, ok, err := pmi.FromEnv(env.lookup, version)
	if err != nil {
		return nil, fmt.Errorf("jobenv: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return &e, nil
}
