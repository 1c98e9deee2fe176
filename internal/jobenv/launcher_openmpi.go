package jobenv

// openMPI is Open MPI's mpirun: OMPI_COMM_WORLD_RANK and _SIZE, the job id of PRRTE
// (PMIX_NAMESPACE) or ORTE, the count of ranks on this host, and whether it bound each rank
// to cores of its own (OMPI_MCA_orte_bound_at_launch=1: its default for jobs of two ranks
// or fewer, --bind-to core). Open MPI hands down no PMI connection: the coordinator and the
// secret are derived from the job id.
var openMPI = launcher{
	source: SourceOpenMPI,
	detect: func(env envReader) bool { return env.has("OMPI_COMM_WORLD_RANK") },
	read: func(env envReader) (placement, error) {
		p, err := readStarter(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
			"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")
		if err == nil {
			p.job.Bound = env.first("OMPI_MCA_orte_bound_at_launch") == "1"
		}
		return p, err
	},
	coord:  derivedCoord,
	secret: derivedSecret,
}
