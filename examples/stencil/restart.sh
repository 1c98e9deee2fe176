#!/bin/sh
# restart.sh starts a job again while it fails, up to $RESTARTS times (default 3), for
# launchers that do not restart it themselves (mpirun, srun; orwlrun has -restarts). A
# program that takes checkpoints (-checkpoint DIR) resumes from the newest complete one:
#
#   examples/stencil/restart.sh mpirun -np 3 -x ORWL_SECRET /tmp/stencil -n 3000000 -iters 2000 -checkpoint /tmp/ck/{rank}
#   examples/stencil/restart.sh srun --mpi=pmi2 -n 3 /tmp/stencil -n 3000000 -iters 2000 -checkpoint /scratch/ck/{host}
#
# Every attempt gets a fresh ORWL_SECRET (Open MPI on one host needs one: pass it with
# -x ORWL_SECRET) and ORWL_ATTEMPT=0, 1, ...; the script exits with the last attempt's status.
set -u
restarts=${RESTARTS:-3}
attempt=0
while :; do
	ORWL_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
	ORWL_ATTEMPT=$attempt
	export ORWL_SECRET ORWL_ATTEMPT
	"$@"
	status=$?
	if [ "$status" -eq 0 ] || [ "$attempt" -ge "$restarts" ]; then
		exit "$status"
	fi
	attempt=$((attempt + 1))
	echo "restart.sh: attempt $((attempt - 1)) failed with status $status; starting attempt $attempt" >&2
done
