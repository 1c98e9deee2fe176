package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// childEnv makes a process of this test binary run main with the arguments it holds.
const childEnv = "CHOLESKY_TEST_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Args = append([]string{"cholesky"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var (
	resultRE   = regexp.MustCompile(`(?m)^\[0\] result: n=(\d+) nb=(\d+) grid=(\S+) kernel=\S+ reps=2 tasks=(\d+) procs=(\d+) first-seconds=[0-9.]+ first-gflops=[0-9.]+ seconds=[0-9.]+ gflops=[0-9.]+ residual=\S+ verified=true\n\z`)
	checksumRE = regexp.MustCompile(`(?m)^\[0\] summary: .* checksum=([0-9a-f]{16})$`)
)

// TestProcessesGiveIdenticalFactors runs the program as 1, 2 and 3 processes for several
// grids and every CPU kernel (one thread): each run verifies, ends with the result line,
// and the checksum of L is the same for every process count.
func TestProcessesGiveIdenticalFactors(t *testing.T) {
	for _, kernel := range kernels.AvailableOn(kernels.CPU) {
		for _, grid := range []string{"3x1", "2x2", "1x3"} {
			sums := map[string][]int{}
			for _, procs := range []int{1, 2, 3} {
				var out, errs bytes.Buffer
				args := fmt.Sprintf("-n 45 -nb 7 -kernel %s -threads 1 -reps 2 -grid %s", kernel, grid)
				status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
					Env: []string{childEnv + "=" + args}, Stdout: &out, Stderr: &errs}.Run()
				m := resultRE.FindStringSubmatch(out.String())
				c := checksumRE.FindStringSubmatch(out.String())
				if status != 0 || m == nil || c == nil || m[5] != fmt.Sprint(procs) || m[3] != grid {
					t.Fatalf("%s %s, %d processes: status %d\n%s%s", kernel, grid, procs, status, out.String(), errs.String())
				}
				sums[c[1]] = append(sums[c[1]], procs)
			}
			if len(sums) != 1 {
				t.Fatalf("%s %s: checksums differ across process counts: %v", kernel, grid, sums)
			}
		}
	}
}

// TestUnderMpirun: started by mpirun, every process is one process of the job and starts
// nothing itself; the process of task 0 prints the result line.
func TestUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun.openmpi") // not "mpirun": MPICH registers one too
	if err != nil {
		t.Skip("mpirun.openmpi not found: install Debian's openmpi-bin to run this test")
	}
	cmd := exec.Command(mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
		"-x", childEnv+"=-n 50 -nb 8 -tasks 3 -kernel gonum", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OMPI_MCA_plm_rsh_agent=", "PRTE_MCA_plm_rsh_agent=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if strings.Count(string(out), "result: ") != 1 || !strings.Contains(string(out), "result: n=50 nb=8 grid=1x3 kernel=gonum reps=1 tasks=3 procs=2 ") || !strings.Contains(string(out), "verified=true") {
		t.Fatalf("want one line result: n=50 nb=8 grid=1x3 kernel=gonum reps=1 tasks=3 procs=2 ... verified=true, got:\n%s", out)
	}
}

// jsonResult is the keys of the -json object the tests read.
type jsonResult struct {
	N           int     `json:"n"`
	NB          int     `json:"nb"`
	Grid        string  `json:"grid"`
	Kernel      string  `json:"kernel"`
	Reps        int     `json:"reps"`
	Tasks       int     `json:"tasks"`
	Procs       int     `json:"procs"`
	FirstGFlops float64 `json:"first-gflops"`
	GFlops      float64 `json:"gflops"`
	Residual    float64 `json:"residual"`
	Checksum    string  `json:"checksum"`
	Verified    bool    `json:"verified"`
}

// TestJSON: -json prints one object with the result line's keys and the defaults chosen.
func TestJSON(t *testing.T) {
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "33", "-grid", "2x1", "-np", "1", "-kernel", "gonum", "-reps", "2", "-json"}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	var r jsonResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if !r.Verified || r.N != 33 || r.NB != 8 || r.Grid != "2x1" || r.Tasks != 2 || r.Procs != 1 || r.Kernel != "gonum" || r.Reps != 2 ||
		r.GFlops <= 0 || r.FirstGFlops <= 0 || r.GFlops < r.FirstGFlops || !(r.Residual < 1) || len(r.Checksum) != 16 {
		t.Fatalf("unexpected result %+v", r)
	}
}

// TestBadFlags: one line on standard error and exit status 2, for every mistake.
func TestBadFlags(t *testing.T) {
	cases := [][]string{
		{"-grid", "3x3", "-tasks", "4"},
		{"-nb", "0"},
		{"-n", "-5"},
		{"-grid", "2by2"},
		{"-kernel", "nosuchkernel"},
		{"-kernel", "gonum:1,gonum:1", "-tasks", "3"},
		{"-np", "3", "-tasks", "2"},
		{"-np", "0"},
		{"-reps", "0"},
		{"-threads", "-1"},
		{"-bogus"},
		{"extra"},
		{"-n", "64", "-grid", "1000000x1000000"},
		{"-n", "64", "-tasks", "9999999"},
		{"-n", "2000000"}, // larger than this machine's memory
	}
	for _, name := range []string{"cublas", "openblas"} {
		if _, err := kernels.GetCholesky(name); err != nil {
			cases = append(cases, []string{"-kernel", name}) // unavailable here, or without the operations
		}
	}
	for _, args := range cases {
		var out, errs bytes.Buffer
		full := args
		if args[0] != "-np" {
			full = append([]string{"-np", "1"}, args...) // never start processes
		}
		status := run(full, &out, &errs)
		lines := strings.Split(strings.TrimSuffix(errs.String(), "\n"), "\n")
		if status != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "cholesky: ") || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, stderr %q", args, status, out.String(), errs.String())
		}
	}
}

// TestGPUMix runs task 0 on the cublas kernel and the others on the fastest CPU kernel,
// in one process, where cublas is available (a GPU, or a stand-in set with ORWL_CUDA_LIB);
// the factor must verify.
func TestGPUMix(t *testing.T) {
	if _, err := kernels.GetCholesky("cublas"); err != nil {
		t.Skipf("cublas unavailable: %v", err)
	}
	cpu := kernels.AvailableOn(kernels.CPU)[0]
	var out, errs bytes.Buffer
	args := []string{"-n", "300", "-nb", "64", "-tasks", "4", "-np", "1", "-threads", "1", "-kernel", "cublas:1," + cpu}
	if status := run(args, &out, &errs); status != 0 || !strings.Contains(out.String(), "verified=true") {
		t.Fatalf("%q: status %d\n%s%s", args, status, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "kernel=cublas:1,"+cpu) {
		t.Fatalf("the summary does not name the mix:\n%s", out.String())
	}
}

// TestTraceFile: -trace writes the job's Chrome trace, which names the tile locations and
// every task's waits.
func TestTraceFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "20", "-nb", "6", "-grid", "1x2", "-np", "1", "-kernel", "gonum", "-trace", file}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	b, err := os.ReadFile(file)
	if err != nil || !json.Valid(b) || !bytes.Contains(b, []byte(`t0.0`)) || !bytes.Contains(b, []byte(`wait`)) {
		t.Fatalf("trace %s: %v, %d bytes, valid JSON %v", file, err, len(b), json.Valid(b))
	}
}
