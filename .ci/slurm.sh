#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (munge, slurmctld, slurmd; root), for the test that
# runs a job under `srun --mpi=pmi2` (examples/blockbound TestUnderSrun). Best effort: when it
# cannot start a cluster it says why and exits 0, and the test skips. It does nothing when a
# cluster already answers, and never replaces an /etc/slurm/slurm.conf it did not write (its own
# it rewrites, and starts the daemons again: a machine restarted since).
set -u
if sinfo -h >/dev/null 2>&1; then exit 0; fi
say() { echo "ci/slurm.sh: $*; TestUnderSrun will skip" >&2; exit 0; }
[ "$(id -u)" = 0 ] || say "not root"
ours="# Written by .ci/slurm.sh: one node, this machine."
if [ -e /etc/slurm/slurm.conf ] && [ "$(head -1 /etc/slurm/slurm.conf)" != "$ours" ]; then
  say "/etc/slurm/slurm.conf exists but no cluster answers; left alone"
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq slurm-wlm munge; } >/dev/null 2>&1 || say "cannot install slurm-wlm and munge"
fi
mkdir -p /run/munge /run/slurm /var/spool/orwl-ci/slurmctld /var/spool/orwl-ci/slurmd /var/log/slurm /etc/slurm
chown munge:munge /run/munge
[ -f /etc/munge/munge.key ] || mungekey -c 2>/dev/null || create-munge-key -f >/dev/null 2>&1 || say "no munge key"
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged || say "munged does not start"
host=$(hostname -s)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
cat > /etc/slurm/slurm.conf <<CONF
$ours
ClusterName=orwlci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
StateSaveLocation=/var/spool/orwl-ci/slurmctld
SlurmdSpoolDir=/var/spool/orwl-ci/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
slurmctld || say "slurmctld does not start (see /var/log/slurm/slurmctld.log)"
slurmd || say "slurmd does not start (see /var/log/slurm/slurmd.log)"
for _ in $(seq 1 30); do
  sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc' && exit 0
  sleep 1
done
say "the node did not come up within 30 s (see /var/log/slurm/)"
