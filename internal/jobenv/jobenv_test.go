package jobenv

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/orwl-go/orwl/internal/pmi"
)

func env(kv ...string) LookupFunc {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func port(id string) string { return strconv.Itoa(DerivedPort(id)) }

// slurmPMI2 is what srun --mpi=pmi2 -n 3 gives rank 0 of job 12 over nodes orh1..3, plus more.
func slurmPMI2(more ...string) []string {
	return append([]string{"PMI_FD=11", "PMI_JOBID=12.0", "PMI_RANK=0", "PMI_SIZE=3", "SLURM_PROCID=0", "SLURM_STEP_ID=0",
		"SLURM_JOB_ID=12", "SLURM_STEP_NODELIST=orh[1-3]", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_TASKS_PER_NODE=1(x3)", "SLURM_MPI_TYPE=pmi2"}, more...)
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name string
		ex   Explicit
		env  LookupFunc
		want Job // Secret compared only when non-nil; WeakSecret always
	}{
		{name: "nothing", env: env(),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceSingle, CoordFD: -1, LocalSize: 1}},
		{name: "explicit wins", ex: Explicit{Rank: 1, Size: 2, Coord: "h:1", Secret: []byte("s")},
			env:  env("ORWL_RANK=0", "ORWL_SIZE=4", "ORWL_COORD=x:2", "ORWL_SECRET=t"),
			want: Job{Rank: 1, Size: 2, Coord: "h:1", CoordFrom: CoordGiven, Listen: "0.0.0.0", Secret: []byte("s"), Source: SourceExplicit, CoordFD: -1}},
		{name: "explicit size, env coord", ex: Explicit{Rank: 0, Size: 2},
			env:  env("ORWL_COORD=127.0.0.1:9", "ORWL_SECRET=t", "ORWL_COORD_FD=3"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:9", CoordFrom: CoordGiven, Listen: "127.0.0.1", Secret: []byte("t"), Source: SourceExplicit, CoordFD: 3, LocalSize: 2}},
		{name: "orwlrun", env: env("ORWL_RANK=2", "ORWL_SIZE=4", "ORWL_COORD=127.0.0.1:4242", "ORWL_SECRET=abc", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=9"),
			want: Job{Rank: 2, Size: 4, Coord: "127.0.0.1:4242", CoordFrom: CoordGiven, Listen: "127.0.0.1", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: -1, LocalSize: 4}},
		{name: "orwlrun rank 0 with fd", env: env("ORWL_RANK=0", "ORWL_SIZE=2", "ORWL_COORD=127.0.0.1:4242", "ORWL_SECRET=abc", "ORWL_COORD_FD=3"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:4242", CoordFrom: CoordGiven, Listen: "127.0.0.1", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: 3, LocalSize: 2}},
		{name: "orwlrun listen override", env: env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD=10.0.0.1:4242", "ORWL_SECRET=abc", "ORWL_LISTEN=10.0.0.2"),
			want: Job{Rank: 1, Size: 2, Coord: "10.0.0.1:4242", CoordFrom: CoordGiven, Listen: "10.0.0.2", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: -1}},
		{name: "orwlrun size 1", env: env("ORWL_RANK=0", "ORWL_SIZE=1"),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceOrwl, CoordFD: -1, LocalSize: 1}},
		{name: "open mpi one host", env: env("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_SIZE=3", "PMIX_NAMESPACE=prterun-host-1234@1", "PMIX_RANK=1"),
			want: Job{Rank: 1, Size: 3, Coord: "127.0.0.1:" + port("prterun-host-1234@1"), CoordFrom: CoordJobID, Listen: "127.0.0.1", WeakSecret: true, Source: SourceOpenMPI, CoordFD: -1,
				LocalSize: 3, JobID: "prterun-host-1234@1"}},
		{name: "open mpi, ranks bound to cores", env: env("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=ns2", "OMPI_MCA_orte_bound_at_launch=1"),
			want: Job{Rank: 1, Size: 2, Coord: "127.0.0.1:" + port("ns2"), CoordFrom: CoordJobID, Listen: "127.0.0.1", WeakSecret: true, Source: SourceOpenMPI, CoordFD: -1,
				LocalSize: 2, JobID: "ns2", Bound: true}},
		{name: "open mpi with ORWL_COORD and secret", env: env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=1", "ORWL_COORD=n1:5000", "ORWL_SECRET=s3"),
			want: Job{Rank: 0, Size: 2, Coord: "n1:5000", CoordFrom: CoordGiven, Listen: "0.0.0.0", Secret: []byte("s3"), Source: SourceOpenMPI, CoordFD: -1, LocalSize: 1}},
		{name: "pmi without a connection", env: env("PMI_RANK=3", "PMI_SIZE=4", "PMI_KVSNAME=kvs_9"),
			want: Job{Rank: 3, Size: 4, Coord: "127.0.0.1:" + port("kvs_9"), CoordFrom: CoordJobID, Listen: "127.0.0.1", WeakSecret: true, Source: SourcePMI, CoordFD: -1,
				LocalSize: 4, JobID: "kvs_9"}},
		{name: "hydra, one host", env: env("PMI_RANK=1", "PMI_SIZE=3", "PMI_FD=6", "MPI_LOCALNRANKS=3"),
			want: Job{CoordFrom: CoordPMI, Rank: 1, Size: 3, Listen: "127.0.0.1", Source: SourcePMI, CoordFD: -1, LocalSize: 3,
				PMI: &pmi.Endpoint{FD: 6, ID: -1, Rank: 1, Size: 3, Version: 1}}},
		{name: "hydra -bind-to core", env: env("PMI_RANK=1", "PMI_SIZE=2", "PMI_FD=6", "MPI_LOCALNRANKS=2", "HYDRA_USER_PROVIDED_BINDING=1"),
			want: Job{CoordFrom: CoordPMI, Rank: 1, Size: 2, Listen: "127.0.0.1", Source: SourcePMI, CoordFD: -1, LocalSize: 2, Bound: true,
				PMI: &pmi.Endpoint{FD: 6, ID: -1, Rank: 1, Size: 2, Version: 1}}},
		{name: "hydra, several hosts", env: env("PMI_RANK=1", "PMI_SIZE=3", "PMI_FD=6", "MPI_LOCALNRANKS=1"),
			want: Job{CoordFrom: CoordPMI, Rank: 1, Size: 3, Listen: "0.0.0.0", Source: SourcePMI, CoordFD: -1, LocalSize: 1,
				PMI: &pmi.Endpoint{FD: 6, ID: -1, Rank: 1, Size: 3, Version: 1}}},
		{name: "hydra -pmi-port, PMI-2 asked", env: env("PMI_RANK=0", "PMI_SIZE=2", "PMI_PORT=vm:4000", "PMI_ID=0", "MPI_LOCALNRANKS=2", "ORWL_PMI=2"),
			want: Job{CoordFrom: CoordPMI, Rank: 0, Size: 2, Listen: "127.0.0.1", Source: SourcePMI, CoordFD: -1, LocalSize: 2, JobID: "vm:4000",
				PMI: &pmi.Endpoint{FD: -1, Addr: "vm:4000", ID: 0, Rank: 0, Size: 2, Version: 2}}},
		{name: "hydra with coordinator and secret set", env: env("PMI_RANK=1", "PMI_SIZE=3", "PMI_FD=6", "MPI_LOCALNRANKS=1", "ORWL_COORD=n1:5000", "ORWL_SECRET=s"),
			want: Job{Rank: 1, Size: 3, Coord: "n1:5000", CoordFrom: CoordGiven, Listen: "0.0.0.0", Secret: []byte("s"), Source: SourcePMI, CoordFD: -1, LocalSize: 1}},
		{name: "hydra with the secret set", env: env("PMI_RANK=1", "PMI_SIZE=3", "PMI_FD=6", "MPI_LOCALNRANKS=3", "ORWL_SECRET=s"),
			want: Job{CoordFrom: CoordPMI, Rank: 1, Size: 3, Listen: "127.0.0.1", Secret: []byte("s"), Source: SourcePMI, CoordFD: -1, LocalSize: 3,
				PMI: &pmi.Endpoint{FD: 6, ID: -1, Rank: 1, Size: 3, Version: 1}}},
		{name: "hydra with the coordinator set", env: env("PMI_RANK=1", "PMI_SIZE=3", "PMI_FD=6", "MPI_LOCALNRANKS=3", "ORWL_COORD=127.0.0.1:9"),
			want: Job{Rank: 1, Size: 3, Coord: "127.0.0.1:9", CoordFrom: CoordGiven, Listen: "127.0.0.1", Source: SourcePMI, CoordFD: -1, LocalSize: 3,
				PMI: &pmi.Endpoint{FD: 6, ID: -1, Rank: 1, Size: 3, Version: 1}}},
		{name: "srun --mpi=pmi2, rank 0 on the second node", env: env(slurmPMI2("SLURM_NODEID=1", "SLURMD_NODENAME=orh2")...),
			want: Job{CoordFrom: CoordPMI, Rank: 0, Size: 3, Listen: "0.0.0.0", Source: SourcePMI, CoordFD: -1, LocalSize: 1, Node: "orh2", JobID: "slurm:12.0",
				Hosts: []string{"orh1", "orh2", "orh3"}, PMI: &pmi.Endpoint{FD: 11, ID: -1, Rank: 0, Size: 3, JobID: "12.0", Version: 2}}},
		{name: "srun --mpi=pmi2, ORWL_PMI=1", env: env(slurmPMI2("SLURM_NODEID=1", "ORWL_PMI=1")...),
			want: Job{CoordFrom: CoordPMI, Rank: 0, Size: 3, Listen: "0.0.0.0", Source: SourcePMI, CoordFD: -1, LocalSize: 1, JobID: "slurm:12.0",
				Hosts: []string{"orh1", "orh2", "orh3"}, PMI: &pmi.Endpoint{FD: 11, ID: -1, Rank: 0, Size: 3, JobID: "12.0", Version: 1}}},
		{name: "srun --mpi=pmi2, ORWL_PMI=off", env: env(slurmPMI2("SLURM_NODEID=1", "ORWL_PMI=off")...),
			want: Job{Rank: 0, Size: 3, Coord: "orh1:" + port("slurm:12.0"), CoordFrom: CoordNodeList, Listen: "0.0.0.0", WeakSecret: true, Source: SourcePMI,
				CoordFD: -1, LocalSize: 1, JobID: "slurm:12.0", Hosts: []string{"orh1", "orh2", "orh3"}}},
		{name: "kubernetes", env: env("JOB_COMPLETION_INDEX=2", "ORWL_SIZE=3", "ORWL_SERVICE=matmul", "ORWL_JOB_NAME=mm", "ORWL_SECRET=k8s", "HOSTNAME=mm-2"),
			want: Job{Rank: 2, Size: 3, Coord: "mm-0.matmul:7411", CoordFrom: CoordKubernetes, Listen: "0.0.0.0", Secret: []byte("k8s"), Source: SourceKubernetes, CoordFD: -1, LocalSize: 1}},
		{name: "kubernetes, job name from the host name", env: env("JOB_COMPLETION_INDEX=0", "ORWL_SIZE=3", "ORWL_SERVICE=svc", "ORWL_SECRET=k8s", "HOSTNAME=my-job-0"),
			want: Job{Rank: 0, Size: 3, Coord: "my-job-0.svc:7411", CoordFrom: CoordKubernetes, Listen: "0.0.0.0", Secret: []byte("k8s"), Source: SourceKubernetes, CoordFD: -1, LocalSize: 1}},
		{name: "kubernetes, coordinator and listen set", env: env("JOB_COMPLETION_INDEX=1", "ORWL_SIZE=2", "ORWL_COORD=10.1.0.5:9000", "ORWL_LISTEN=10.1.0.6", "ORWL_SECRET=k8s"),
			want: Job{Rank: 1, Size: 2, Coord: "10.1.0.5:9000", CoordFrom: CoordGiven, Listen: "10.1.0.6", Secret: []byte("k8s"), Source: SourceKubernetes, CoordFD: -1, LocalSize: 1}},
		{name: "orwlrun inside a pod", env: env("JOB_COMPLETION_INDEX=1", "ORWL_RANK=0", "ORWL_SIZE=2", "ORWL_COORD=127.0.0.1:9", "ORWL_SECRET=s"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:9", CoordFrom: CoordGiven, Listen: "127.0.0.1", Secret: []byte("s"), Source: SourceOrwl, CoordFD: -1, LocalSize: 2}},
		{name: "slurm tasks per node", env: env("SLURM_PROCID=4", "SLURM_STEP_NUM_TASKS=5", "SLURM_STEP_ID=0", "SLURM_JOB_ID=3", "SLURM_STEP_NODELIST=n[1-3]",
			"SLURM_STEP_TASKS_PER_NODE=2(x2),1", "SLURM_NODEID=2", "ORWL_SECRET=x"),
			want: Job{Rank: 4, Size: 5, Coord: "n1:" + port("slurm:3.0"), CoordFrom: CoordNodeList, Listen: "0.0.0.0", Secret: []byte("x"), Source: SourceSLURM, CoordFD: -1,
				LocalSize: 1, JobID: "slurm:3.0", Hosts: []string{"n1", "n2", "n3"}}},
		{name: "pmix", env: env("PMIX_RANK=0", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns7"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:" + port("ns7"), CoordFrom: CoordJobID, Listen: "127.0.0.1", WeakSecret: true, Source: SourcePMIx, CoordFD: -1,
				LocalSize: 2, JobID: "ns7"}},
		{name: "slurm multi-node", env: env("SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_STEP_ID=0", "SLURM_JOB_ID=777", "SLURM_STEP_NODELIST=node[01-02,07],gpu1"),
			want: Job{Rank: 5, Size: 8, Coord: "node01:" + port("slurm:777.0"), CoordFrom: CoordNodeList, Listen: "0.0.0.0", WeakSecret: true, Source: SourceSLURM, CoordFD: -1,
				JobID: "slurm:777.0", Hosts: []string{"node01", "node02", "node07", "gpu1"}}},
		{name: "slurm step size preferred", env: env("SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEPID=3", "SLURM_JOBID=9", "SLURM_STEP_NODELIST=n1", "ORWL_SECRET=x"),
			want: Job{Rank: 1, Size: 2, Coord: "127.0.0.1:" + port("slurm:9.3"), CoordFrom: CoordJobID, Listen: "127.0.0.1", Secret: []byte("x"), Source: SourceSLURM, CoordFD: -1,
				Hosts: []string{"n1"}, LocalSize: 2, JobID: "slurm:9.3"}},
		{name: "srun --mpi=pmix", env: env("PMIX_RANK=1", "SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_JOB_ID=5", "SLURM_STEP_NODELIST=a[1-2]", "PMIX_NAMESPACE=slurm.pmix.5.0"),
			want: Job{Rank: 1, Size: 2, Coord: "a1:" + port("slurm:5.0"), CoordFrom: CoordNodeList, Listen: "0.0.0.0", WeakSecret: true, Source: SourcePMIx, CoordFD: -1,
				Hosts: []string{"a1", "a2"}, JobID: "slurm:5.0"}},
		{name: "srun binding each task to cores of its own", env: env("SLURM_PROCID=1", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=6", "SLURM_STEP_NODELIST=n1",
			"SLURM_CPUS_ON_NODE=2", "SLURM_CPU_BIND_TYPE=mask_cpu:", "ORWL_SECRET=x"),
			want: Job{Rank: 1, Size: 2, Coord: "127.0.0.1:" + port("slurm:6.0"), CoordFrom: CoordJobID, Listen: "127.0.0.1", Secret: []byte("x"), Source: SourceSLURM, CoordFD: -1,
				Hosts: []string{"n1"}, LocalSize: 2, Bound: true, Cores: 2, JobID: "slurm:6.0"}},
		{name: "srun --cpu-bind=none", env: env("SLURM_PROCID=1", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=6", "SLURM_STEP_NODELIST=n1",
			"SLURM_CPUS_ON_NODE=2", "SLURM_CPU_BIND_TYPE=none", "ORWL_SECRET=x"),
			want: Job{Rank: 1, Size: 2, Coord: "127.0.0.1:" + port("slurm:6.0"), CoordFrom: CoordJobID, Listen: "127.0.0.1", Secret: []byte("x"), Source: SourceSLURM, CoordFD: -1,
				Hosts: []string{"n1"}, LocalSize: 2, Cores: 2, JobID: "slurm:6.0"}},
		{name: "slurm batch script is not a step", env: env("SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=777", "SLURM_JOB_NODELIST=n[1-2]"),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceSingle, CoordFD: -1, LocalSize: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Discover(tc.ex, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want.Secret == nil && want.WeakSecret {
				if len(got.Secret) != 32 {
					t.Errorf("derived secret of %d bytes", len(got.Secret))
				}
				want.Secret = got.Secret
			}
			if got.Rank != want.Rank || got.Size != want.Size || got.Coord != want.Coord || got.Listen != want.Listen ||
				string(got.Secret) != string(want.Secret) || got.WeakSecret != want.WeakSecret || got.Source != want.Source ||
				got.CoordFD != want.CoordFD || !slices.Equal(got.Hosts, want.Hosts) || got.CoordFrom != want.CoordFrom ||
				got.LocalSize != want.LocalSize || got.Bound != want.Bound || got.Cores != want.Cores || got.Node != want.Node || got.JobID != want.JobID ||
				(got.PMI == nil) != (want.PMI == nil) || got.PMI != nil && *got.PMI != *want.PMI {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// Every process of a job derives the same secret; different jobs do not.
func TestDerivedSecretAgrees(t *testing.T) {
	a, _ := Discover(Explicit{}, env("PMIX_RANK=0", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns7"))
	b, _ := Discover(Explicit{}, env("PMIX_RANK=1", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns7"))
	c, _ := Discover(Explicit{}, env("PMIX_RANK=1", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns8"))
	if string(a.Secret) != string(b.Secret) || string(a.Secret) == string(c.Secret) || a.Coord != b.Coord {
		t.Fatal("derived values disagree within a job or agree across jobs")
	}
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		name, wantVar string
		ex            Explicit
		env           LookupFunc
	}{
		{"rank >= size", "ORWL_RANK", Explicit{}, env("ORWL_RANK=4", "ORWL_SIZE=4", "ORWL_COORD=h:1", "ORWL_SECRET=s")},
		{"negative rank", "ORWL_RANK", Explicit{}, env("ORWL_RANK=-1", "ORWL_SIZE=4")},
		{"size 0", "ORWL_SIZE", Explicit{}, env("ORWL_RANK=0", "ORWL_SIZE=0")},
		{"rank not a number", "ORWL_RANK", Explicit{}, env("ORWL_RANK=one", "ORWL_SIZE=2")},
		{"size missing", "ORWL_SIZE", Explicit{}, env("ORWL_RANK=1")},
		{"rank missing", "ORWL_RANK", Explicit{}, env("ORWL_SIZE=2")},
		{"no coord", "ORWL_COORD", Explicit{}, env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_SECRET=s")},
		{"no secret", "ORWL_SECRET", Explicit{}, env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD=h:1")},
		{"bad coord", "ORWL_COORD", Explicit{}, env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD=nohostport", "ORWL_SECRET=s")},
		{"bad coord port", "ORWL_COORD", Explicit{}, env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD=h:99999", "ORWL_SECRET=s")},
		{"bad fd", "ORWL_COORD_FD", Explicit{}, env("ORWL_RANK=0", "ORWL_SIZE=2", "ORWL_COORD=h:1", "ORWL_SECRET=s", "ORWL_COORD_FD=x")},
		{"explicit rank", "Explicit.Rank", Explicit{Rank: 3, Size: 2}, env()},
		{"ompi rank", "OMPI_COMM_WORLD_RANK", Explicit{}, env("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=2")},
		{"ompi local size", "OMPI_COMM_WORLD_LOCAL_SIZE", Explicit{}, env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=x")},
		{"ompi multi-host", "ORWL_COORD", Explicit{}, env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=1", "PMIX_NAMESPACE=x")},
		{"ompi no job id", "ORWL_COORD", Explicit{}, env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2")},
		{"pmix no size", "PMIX_SIZE", Explicit{}, env("PMIX_RANK=0")},
		{"slurm rank", "SLURM_PROCID", Explicit{}, env("SLURM_PROCID=x", "SLURM_NTASKS=2", "SLURM_STEP_ID=0")},
		{"slurm nodelist", "SLURM_STEP_NODELIST", Explicit{}, env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURM_STEP_NODELIST=n[1-")},
		{"slurm tasks per node", "SLURM_STEP_TASKS_PER_NODE", Explicit{}, env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=1(3)")},
		{"slurm node id", "SLURM_NODEID", Explicit{}, env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_NODEID=first")},
		{"slurm cores", "SLURM_CPUS_ON_NODE", Explicit{}, env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURM_STEP_NODELIST=n1", "SLURM_CPUS_ON_NODE=two")},
		{"slurm no cores", "SLURM_CPUS_ON_NODE", Explicit{}, env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURM_STEP_NODELIST=n1", "SLURM_CPUS_ON_NODE=0")},
		{"hydra local size", "MPI_LOCALNRANKS", Explicit{}, env("PMI_RANK=0", "PMI_SIZE=2", "PMI_FD=6", "MPI_LOCALNRANKS=0")},
		{"hydra bad fd", "PMI_FD", Explicit{}, env("PMI_RANK=0", "PMI_SIZE=2", "PMI_FD=six")},
		{"hydra bad ORWL_PMI", "ORWL_PMI", Explicit{}, env("PMI_RANK=0", "PMI_SIZE=2", "PMI_FD=6", "ORWL_PMI=3")},
		{"pmi without connection nor job id", "PMI connection", Explicit{}, env("PMI_RANK=0", "PMI_SIZE=2")},
		{"pmi off without job id", "ORWL_COORD", Explicit{}, env("PMI_RANK=0", "PMI_SIZE=2", "PMI_FD=6", "ORWL_PMI=off")},
		{"kubernetes without size", "ORWL_SIZE", Explicit{}, env("JOB_COMPLETION_INDEX=0", "ORWL_SERVICE=s", "ORWL_JOB_NAME=j", "ORWL_SECRET=x")},
		{"kubernetes index", "JOB_COMPLETION_INDEX", Explicit{}, env("JOB_COMPLETION_INDEX=3", "ORWL_SIZE=3", "ORWL_SERVICE=s", "ORWL_JOB_NAME=j", "ORWL_SECRET=x")},
		{"kubernetes without service", "ORWL_SERVICE", Explicit{}, env("JOB_COMPLETION_INDEX=0", "ORWL_SIZE=2", "ORWL_JOB_NAME=j", "ORWL_SECRET=x")},
		{"kubernetes without job name", "ORWL_JOB_NAME", Explicit{}, env("JOB_COMPLETION_INDEX=1", "ORWL_SIZE=2", "ORWL_SERVICE=s", "ORWL_SECRET=x", "HOSTNAME=node7")},
		{"kubernetes without secret", "ORWL_SECRET", Explicit{}, env("JOB_COMPLETION_INDEX=0", "ORWL_SIZE=2", "ORWL_SERVICE=s", "ORWL_JOB_NAME=j")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Discover(tc.ex, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.wantVar) {
				t.Fatalf("error %v, want one naming %s", err, tc.wantVar)
			}
		})
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"node1", []string{"node1"}},
		{"a,b, c", []string{"a", "b", "c"}},
		{"node[01-04,07],gpu[1-2]", []string{"node01", "node02", "node03", "node04", "node07", "gpu1", "gpu2"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"rack[1-2]-node[3]-ib", []string{"rack1-node3-ib", "rack2-node3-ib"}},
		{"[1-3]", []string{"1", "2", "3"}},
		{"x[5]", []string{"x5"}},
		{"host-1.example.org,host-2.example.org", []string{"host-1.example.org", "host-2.example.org"}},
	}
	for _, tc := range tests {
		got, err := ExpandHostlist(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"n[1-", "n1]", "n[]", "n[3-1]", "n[a-b]", "n[1-2", "n[[1]]", "a,,b", "n[-1]", "n[1-]", "n[0-99999999]"} {
		if got, err := ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = %q, want an error", bad, got)
		}
	}
}

func TestCoordListener(t *testing.T) {
	j := Job{CoordFD: -1}
	if ln, err := j.CoordListener(); ln != nil || err != nil {
		t.Fatalf("no fd: %v %v", ln, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	j.CoordFD = fd // CoordListener takes ownership of fd
	ln2, err := j.CoordListener()
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if ln2.Addr().String() != ln.Addr().String() {
		t.Fatalf("inherited listener on %v, want %v", ln2.Addr(), ln.Addr())
	}
}

func TestFromEnvRuns(t *testing.T) {
	t.Setenv("ORWL_RANK", "0")
	t.Setenv("ORWL_SIZE", "1")
	if j, err := FromEnv(Explicit{}); err != nil || j.Size != 1 {
		t.Fatal(j, err)
	}
}
