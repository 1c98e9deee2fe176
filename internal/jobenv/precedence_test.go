package jobenv

import (
	"slices"
	"strings"
	"testing"
)

// launcherEnvs are minimal environments of each launcher, each placing this process at a rank
// of its own so that the result shows which one was read. ORWL_SIZE is shared by orwlrun and
// Kubernetes (the manifest sets it), so every job has 8 processes.
var launcherEnvs = []struct {
	source string
	rank   int
	vars   []string
}{
	{SourceOrwl, 1, []string{"ORWL_RANK=1", "ORWL_SIZE=8"}},
	{SourceKubernetes, 2, []string{"JOB_COMPLETION_INDEX=2", "ORWL_SIZE=8"}},
	{SourceOpenMPI, 3, []string{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8"}},
	{SourcePMI, 4, []string{"PMI_RANK=4", "PMI_SIZE=8"}},
	{SourcePMIx, 5, []string{"PMIX_RANK=5", "PMIX_SIZE=8"}},
	{SourceSLURM, 6, []string{"SLURM_PROCID=6", "SLURM_STEP_NUM_TASKS=8", "SLURM_STEP_ID=0"}},
}

// given sets the coordinator and the secret, so that every launcher's environment is
// complete and only the choice of launcher is tested.
var given = []string{"ORWL_COORD=10.0.0.1:9000", "ORWL_SECRET=s"}

// Of two launchers' environments, the one earlier in launcherEnvs wins, and explicit values
// win over every one.
func TestPrecedencePairs(t *testing.T) {
	for i, a := range launcherEnvs {
		for _, b := range launcherEnvs[i:] {
			vars := append(append(append([]string{}, given...), b.vars...), a.vars...)
			t.Run(a.source+"+"+b.source, func(t *testing.T) {
				j, err := Discover(Explicit{}, env(vars...))
				if err != nil || j.Source != a.source || j.Rank != a.rank || j.Size != 8 {
					t.Fatalf("%v: got %s rank %d of %d, %v; want %s rank %d of 8", vars, j.Source, j.Rank, j.Size, err, a.source, a.rank)
				}
			})
			t.Run("explicit+"+a.source+"+"+b.source, func(t *testing.T) {
				j, err := Discover(Explicit{Rank: 7, Size: 8}, env(vars...))
				if err != nil || j.Source != SourceExplicit || j.Rank != 7 || j.Size != 8 {
					t.Fatalf("%v: got %s rank %d of %d, %v; want explicit rank 7 of 8", vars, j.Source, j.Rank, j.Size, err)
				}
			})
		}
	}
}

// With every launcher's variables set, taking away the winner's own variables one launcher
// at a time goes down the order of precedence; ORWL_SIZE left alone (the pod's index gone
// too) is orwlrun's, without a rank.
func TestPrecedencePeel(t *testing.T) {
	vars := slices.Clone(given)
	for _, l := range launcherEnvs {
		vars = append(vars, l.vars...)
	}
	without := func(name string) {
		vars = slices.DeleteFunc(vars, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	steps := []struct {
		source  string // "" for an error naming wantErr
		rank    int
		wantErr string
		remove  []string
	}{
		{source: SourceOrwl, rank: 1, remove: []string{"ORWL_RANK"}},
		{source: SourceKubernetes, rank: 2, remove: []string{"JOB_COMPLETION_INDEX"}},
		{wantErr: "ORWL_RANK", remove: []string{"ORWL_SIZE"}},
		{source: SourceOpenMPI, rank: 3, remove: []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}},
		{source: SourcePMI, rank: 4, remove: []string{"PMI_RANK"}},
		{source: SourcePMIx, rank: 5, remove: []string{"PMIX_RANK"}},
		{source: SourceSLURM, rank: 6, remove: []string{"SLURM_STEP_ID"}},
		{source: SourceSingle, rank: 0},
	}
	for _, s := range steps {
		j, err := Discover(Explicit{}, env(vars...))
		switch {
		case s.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Fatalf("%v: got %s rank %d, %v; want an error naming %s", vars, j.Source, j.Rank, err, s.wantErr)
			}
		case err != nil || j.Source != s.source || j.Rank != s.rank:
			t.Fatalf("%v: got %s rank %d, %v; want %s rank %d", vars, j.Source, j.Rank, err, s.source, s.rank)
		}
		for _, name := range s.remove {
			without(name)
		}
	}
}

// Within a launcher, the variables it reads for the size, the job id and the node list are
// taken in a fixed order, and SLURM's node list counts only under srun (SLURM, PMI, PMIx).
func TestPrecedenceWithinLaunchers(t *testing.T) {
	tests := []struct {
		name         string
		vars         []string
		size         int
		jobID, hosts string
	}{
		{"pmix size from PMIX_SIZE", []string{"PMIX_RANK=0", "PMIX_SIZE=2", "PMI_SIZE=3", "OMPI_COMM_WORLD_SIZE=4", "SLURM_STEP_NUM_TASKS=5"}, 2, "", ""},
		{"pmix size from PMI_SIZE", []string{"PMIX_RANK=0", "PMI_SIZE=3", "OMPI_COMM_WORLD_SIZE=4", "SLURM_STEP_NUM_TASKS=5"}, 3, "", ""},
		{"pmix size from OMPI_COMM_WORLD_SIZE", []string{"PMIX_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "SLURM_STEP_NUM_TASKS=5"}, 4, "", ""},
		{"pmix size from SLURM_STEP_NUM_TASKS", []string{"PMIX_RANK=0", "SLURM_STEP_NUM_TASKS=5", "SLURM_NTASKS=6"}, 5, "", ""},
		{"slurm size from SLURM_NTASKS", []string{"SLURM_PROCID=0", "SLURM_STEPID=1", "SLURM_NTASKS=6"}, 6, "", ""},
		{"open mpi job id from PMIX_NAMESPACE", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ns", "OMPI_MCA_ess_base_jobid=e", "OMPI_MCA_orte_ess_jobid=o"}, 2, "ns", ""},
		{"open mpi job id from ess_base", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_MCA_ess_base_jobid=e", "OMPI_MCA_orte_ess_jobid=o"}, 2, "e", ""},
		{"open mpi job id from orte", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_MCA_orte_ess_jobid=o"}, 2, "o", ""},
		{"open mpi ignores the SLURM node list", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ns", "SLURM_JOB_ID=4", "SLURM_STEP_ID=0", "SLURM_JOB_NODELIST=n[1-2]"}, 2, "ns", ""},
		{"pmi job id from PMI_JOBID", []string{"PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=j", "PMIX_NAMESPACE=ns", "PMI_KVSNAME=k", "PMI_PORT=h:1"}, 2, "j", ""},
		{"pmi job id from PMIX_NAMESPACE", []string{"PMI_RANK=0", "PMI_SIZE=2", "PMIX_NAMESPACE=ns", "PMI_KVSNAME=k", "PMI_PORT=h:1"}, 2, "ns", ""},
		{"pmi job id from PMI_KVSNAME", []string{"PMI_RANK=0", "PMI_SIZE=2", "PMI_KVSNAME=k", "PMI_PORT=h:1"}, 2, "k", ""},
		{"pmi job id from PMI_PORT", []string{"PMI_RANK=0", "PMI_SIZE=2", "PMI_PORT=h:1"}, 2, "h:1", ""},
		{"pmix job id from PMIX_NAMESPACE", []string{"PMIX_RANK=0", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns", "SLURM_JOB_ID=4"}, 2, "ns", ""},
		{"pmix job id from SLURM_JOB_ID", []string{"PMIX_RANK=0", "PMIX_SIZE=2", "SLURM_JOB_ID=4"}, 2, "4", ""},
		{"srun's job id wins over PMI's", []string{"PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=j", "SLURM_JOB_ID=4", "SLURM_STEP_ID=1", "SLURM_JOB_NODELIST=n[1-2]"}, 2, "slurm:4.1", "n1 n2"},
		{"srun's job id wins over PMIx's", []string{"PMIX_RANK=0", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns", "SLURM_JOBID=4", "SLURM_STEPID=1", "SLURM_NODELIST=n[1-2]"}, 2, "slurm:4.1", "n1 n2"},
		{"step node list first", []string{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4", "SLURM_STEP_NODELIST=s[1-2]", "SLURM_JOB_NODELIST=j[1-2]", "SLURM_NODELIST=n[1-2]"}, 2, "slurm:4.0", "s1 s2"},
		{"job node list next", []string{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4", "SLURM_JOB_NODELIST=j[1-2]", "SLURM_NODELIST=n[1-2]"}, 2, "slurm:4.0", "j1 j2"},
		{"SLURM_JOB_ID before SLURM_JOBID", []string{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4", "SLURM_JOBID=5", "SLURM_NODELIST=n[1-2]"}, 2, "slurm:4.0", "n1 n2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Discover(Explicit{}, env(append(slices.Clone(given), tc.vars...)...))
			if err != nil || j.Size != tc.size || j.JobID != tc.jobID || strings.Join(j.Hosts, " ") != tc.hosts {
				t.Fatalf("got size %d, job id %q, hosts %q, %v; want %d, %q, %q", j.Size, j.JobID, j.Hosts, err, tc.size, tc.jobID, tc.hosts)
			}
		})
	}
}

// The coordinator, the listen host, the secret and the inherited listener: explicit values
// first, then the variables, then what the launcher derives.
func TestPrecedenceOfValues(t *testing.T) {
	orwl := []string{"ORWL_RANK=0", "ORWL_SIZE=2", "ORWL_COORD=127.0.0.1:9", "ORWL_SECRET=env", "ORWL_LISTEN=10.0.0.2", "ORWL_COORD_FD=3"}
	tests := []struct {
		name   string
		ex     Explicit
		vars   []string
		coord  string
		from   string
		listen string
		secret string
		fd     int
	}{
		{"variables", Explicit{}, orwl, "127.0.0.1:9", CoordGiven, "10.0.0.2", "env", 3},
		{"explicit listen", Explicit{Listen: "10.0.0.3"}, orwl, "127.0.0.1:9", CoordGiven, "10.0.0.3", "env", 3},
		{"explicit secret", Explicit{Secret: []byte("ex")}, orwl, "127.0.0.1:9", CoordGiven, "10.0.0.2", "ex", 3},
		{"explicit coordinator: no inherited listener", Explicit{Coord: "127.0.0.1:8"}, orwl, "127.0.0.1:8", CoordGiven, "10.0.0.2", "env", -1},
		{"rank 1: no inherited listener", Explicit{}, append(slices.Clone(orwl), "ORWL_RANK=1"), "127.0.0.1:9", CoordGiven, "10.0.0.2", "env", -1},
		{"ORWL_COORD over PMI", Explicit{}, []string{"PMI_RANK=0", "PMI_SIZE=2", "PMI_FD=6", "ORWL_COORD=10.0.0.1:9", "ORWL_SECRET=env"}, "10.0.0.1:9", CoordGiven, "0.0.0.0", "env", -1},
		{"ORWL_COORD over Kubernetes", Explicit{}, []string{"JOB_COMPLETION_INDEX=1", "ORWL_SIZE=2", "ORWL_SERVICE=s", "ORWL_JOB_NAME=j", "ORWL_COORD=10.0.0.1:9", "ORWL_SECRET=env"}, "10.0.0.1:9", CoordGiven, "0.0.0.0", "env", -1},
		{"ORWL_JOB_NAME over HOSTNAME", Explicit{}, []string{"JOB_COMPLETION_INDEX=1", "ORWL_SIZE=2", "ORWL_SERVICE=s", "ORWL_JOB_NAME=j", "HOSTNAME=h-1", "ORWL_SECRET=env"}, "j-0.s:7411", CoordKubernetes, "0.0.0.0", "env", -1},
		{"ORWL_COORD over a node list", Explicit{}, []string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4", "SLURM_STEP_NODELIST=n[1-2]", "ORWL_COORD=127.0.0.1:9", "ORWL_SECRET=env"}, "127.0.0.1:9", CoordGiven, "127.0.0.1", "env", -1},
		{"explicit over everything", Explicit{Rank: 0, Size: 2, Coord: "127.0.0.1:8", Listen: "10.0.0.3", Secret: []byte("ex")}, append(slices.Clone(orwl), "PMI_RANK=1", "PMI_SIZE=2", "PMI_FD=6"), "127.0.0.1:8", CoordGiven, "10.0.0.3", "ex", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Discover(tc.ex, env(tc.vars...))
			if err != nil || j.Coord != tc.coord || j.CoordFrom != tc.from || j.Listen != tc.listen || string(j.Secret) != tc.secret || j.CoordFD != tc.fd || j.PMI != nil {
				t.Fatalf("got coord %q from %q, listen %q, secret %q, fd %d, PMI %v, %v; want %q from %q, %q, %q, %d, no PMI",
					j.Coord, j.CoordFrom, j.Listen, j.Secret, j.CoordFD, j.PMI, err, tc.coord, tc.from, tc.listen, tc.secret, tc.fd)
			}
		})
	}
}

// The table Discover goes through is in the order the tests above pin, and every record
// is complete (a job of several processes needs each of its functions).
func TestLaunchersTable(t *testing.T) {
	var got, want []string
	for _, l := range launchers {
		got = append(got, l.source)
		if l.detect == nil || l.read == nil || l.coord == nil || l.secret == nil {
			t.Errorf("launcher %s: a function is missing", l.source)
		}
	}
	for _, l := range launcherEnvs {
		want = append(want, l.source)
	}
	if !slices.Equal(got, want) {
		t.Errorf("launchers in the order %q, want %q", got, want)
	}
	for _, l := range []launcher{explicit(Explicit{Size: 1}), single} {
		if l.read == nil || l.coord == nil || l.secret == nil {
			t.Errorf("launcher %s: a function is missing", l.source)
		}
	}
}
