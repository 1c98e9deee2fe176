package jobenv

// orwlrun is orwlrun's environment (cmd/orwlrun, orwl.Launch), also what a user sets by
// hand under any other starter: ORWL_RANK and ORWL_SIZE, with ORWL_COORD and ORWL_SECRET
// required for a job of several processes. ORWL_SIZE without ORWL_RANK is orwlrun's (an
// error: the rank is missing) unless JOB_COMPLETION_INDEX is set, where it is the size of
// a Kubernetes Indexed Job.
var orwlrun = launcher{
	source: SourceOrwl,
	detect: func(env envReader) bool {
		return env.has(EnvRank) || env.has(EnvSize) && !env.has(EnvIndex)
	},
	read: func(env envReader) (placement, error) {
		return readRankSize(env, EnvRank, EnvSize)
	},
	coord:  requireCoord,
	secret: requireSecret,
}
