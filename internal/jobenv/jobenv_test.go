package jobenv

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
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

func TestDiscover(t *testing.T) {
	tests := []struct {
		name string
		ex   Explicit
		env  LookupFunc
		want Job // Secret compared only when non-nil; WeakSecret always
	}{
		{name: "nothing", env: env(),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceSingle, CoordFD: -1}},
		{name: "explicit wins", ex: Explicit{Rank: 1, Size: 2, Coord: "h:1", Secret: []byte("s")},
			env:  env("ORWL_RANK=0", "ORWL_SIZE=4", "ORWL_COORD=x:2", "ORWL_SECRET=t"),
			want: Job{Rank: 1, Size: 2, Coord: "h:1", Listen: "0.0.0.0", Secret: []byte("s"), Source: SourceExplicit, CoordFD: -1}},
		{name: "explicit size, env coord", ex: Explicit{Rank: 0, Size: 2},
			env:  env("ORWL_COORD=127.0.0.1:9", "ORWL_SECRET=t", "ORWL_COORD_FD=3"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:9", Listen: "127.0.0.1", Secret: []byte("t"), Source: SourceExplicit, CoordFD: 3}},
		{name: "orwlrun", env: env("ORWL_RANK=2", "ORWL_SIZE=4", "ORWL_COORD=127.0.0.1:4242", "ORWL_SECRET=abc", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=9"),
			want: Job{Rank: 2, Size: 4, Coord: "127.0.0.1:4242", Listen: "127.0.0.1", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: -1}},
		{name: "orwlrun rank 0 with fd", env: env("ORWL_RANK=0", "ORWL_SIZE=2", "ORWL_COORD=127.0.0.1:4242", "ORWL_SECRET=abc", "ORWL_COORD_FD=3"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:4242", Listen: "127.0.0.1", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: 3}},
		{name: "orwlrun listen override", env: env("ORWL_RANK=1", "ORWL_SIZE=2", "ORWL_COORD=10.0.0.1:4242", "ORWL_SECRET=abc", "ORWL_LISTEN=10.0.0.2"),
			want: Job{Rank: 1, Size: 2, Coord: "10.0.0.1:4242", Listen: "10.0.0.2", Secret: []byte("abc"), Source: SourceOrwl, CoordFD: -1}},
		{name: "orwlrun size 1", env: env("ORWL_RANK=0", "ORWL_SIZE=1"),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceOrwl, CoordFD: -1}},
		{name: "open mpi one host", env: env("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_SIZE=3", "PMIX_NAMESPACE=prterun-host-1234@1", "PMIX_RANK=1"),
			want: Job{Rank: 1, Size: 3, Coord: "127.0.0.1:" + port("prterun-host-1234@1"), Listen: "127.0.0.1", WeakSecret: true, Source: SourceOpenMPI, CoordFD: -1}},
		{name: "open mpi with ORWL_COORD and secret", env: env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=1", "ORWL_COORD=n1:5000", "ORWL_SECRET=s3"),
			want: Job{Rank: 0, Size: 2, Coord: "n1:5000", Listen: "0.0.0.0", Secret: []byte("s3"), Source: SourceOpenMPI, CoordFD: -1}},
		{name: "pmi (hydra)", env: env("PMI_RANK=3", "PMI_SIZE=4", "PMI_PORT=host:40000"),
			want: Job{Rank: 3, Size: 4, Coord: "127.0.0.1:" + port("host:40000"), Listen: "127.0.0.1", WeakSecret: true, Source: SourcePMI, CoordFD: -1}},
		{name: "pmix", env: env("PMIX_RANK=0", "PMIX_SIZE=2", "PMIX_NAMESPACE=ns7"),
			want: Job{Rank: 0, Size: 2, Coord: "127.0.0.1:" + port("ns7"), Listen: "127.0.0.1", WeakSecret: true, Source: SourcePMIx, CoordFD: -1}},
		{name: "slurm multi-node", env: env("SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_STEP_ID=0", "SLURM_JOB_ID=777", "SLURM_STEP_NODELIST=node[01-02,07],gpu1"),
			want: Job{Rank: 5, Size: 8, Coord: "node01:" + port("slurm:777.0"), Listen: "0.0.0.0", WeakSecret: true, Source: SourceSLURM, CoordFD: -1,
				Hosts: []string{"node01", "node02", "node07", "gpu1"}}},
		{name: "slurm step size preferred", env: env("SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEPID=3", "SLURM_JOBID=9", "SLURM_STEP_NODELIST=n1", "ORWL_SECRET=x"),
			want: Job{Rank: 1, Size: 2, Coord: "127.0.0.1:" + port("slurm:9.3"), Listen: "127.0.0.1", Secret: []byte("x"), Source: SourceSLURM, CoordFD: -1, Hosts: []string{"n1"}}},
		{name: "srun --mpi=pmix", env: env("PMIX_RANK=1", "SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_JOB_ID=5", "SLURM_STEP_NODELIST=a[1-2]", "PMIX_NAMESPACE=slurm.pmix.5.0"),
			want: Job{Rank: 1, Size: 2, Coord: "a1:" + port("slurm:5.0"), Listen: "0.0.0.0", WeakSecret: true, Source: SourcePMIx, CoordFD: -1, Hosts: []string{"a1", "a2"}}},
		{name: "slurm batch script is not a step", env: env("SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=777", "SLURM_JOB_NODELIST=n[1-2]"),
			want: Job{Rank: 0, Size: 1, Listen: "127.0.0.1", Source: SourceSingle, CoordFD: -1}},
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
				got.CoordFD != want.CoordFD || !slices.Equal(got.Hosts, want.Hosts) {
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
