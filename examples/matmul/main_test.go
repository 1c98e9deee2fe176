package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/matmul/summa"
	"github.com/orwl-go/orwl/kernels"
	"github.com/orwl-go/orwl/orwl"
)

// childEnv makes a process of this test binary run main with the arguments it holds.
const childEnv = "MATMUL_TEST_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Args = append([]string{"matmul"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cpuKernels are the CPU kernels available here.
func cpuKernels(t *testing.T) []string {
	names := kernels.AvailableOn(kernels.CPU)
	if len(names) == 0 {
		t.Fatal("no CPU kernel available")
	}
	return names
}

var (
	resultRE   = regexp.MustCompile(`(?m)^\[0\] result: n=(\d+) nb=(\d+) grid=(\S+) kernel=(\S+) reps=(\d+) tasks=(\d+) procs=(\d+) first-seconds=[0-9.]+ first-gflops=[0-9.]+ seconds=[0-9.]+ gflops=[0-9.]+ verified=true\n\z`)
	checksumRE = regexp.MustCompile(`(?m)^\[0\] summary: checks=freivalds\+exact .* checksum=([0-9a-f]{16})$`)
)

// TestProcessesGiveIdenticalResults runs the program as 1, 2 and 3 processes for several
// grids (and a static split of the balanced mode) and every CPU kernel: each run verifies, ends with the result line, and the
// checksum of C is the same for every process count.
func TestProcessesGiveIdenticalResults(t *testing.T) {
	for _, kernel := range cpuKernels(t) {
		for _, grid := range []string{"1x3", "2x2", "1x3 -split 1,2,1"} {
			sums := map[string][]int{}
			for _, procs := range []int{1, 2, 3} {
				var out, errs bytes.Buffer
				args := fmt.Sprintf("-n 45 -nb 7 -kernel %s -reps 2 -verify -grid %s", kernel, grid)
				status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
					Env: []string{childEnv + "=" + args}, Stdout: &out, Stderr: &errs}.Run()
				m := resultRE.FindStringSubmatch(out.String())
				c := checksumRE.FindStringSubmatch(out.String())
				if status != 0 || m == nil || c == nil || m[7] != fmt.Sprint(procs) || m[4] != kernel || m[5] != "2" {
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

// TestPanelLentToOneLocationAtATime: with one panel per owner (NB = N/2), which its
// owner publishes through either of its panel locations in turn, two multiplications give
// the product on 2 processes of one host (panels read in place, lent by swapping shared
// memory) and on 1 (pages moved): lent twice, the second location read what the first
// held ("exact-max-error=58.2", status 3).
func TestPanelLentToOneLocationAtATime(t *testing.T) {
	for _, procs := range []int{1, 2} {
		var out, errs bytes.Buffer
		args := "-n 1024 -nb 512 -kernel " + cpuKernels(t)[0] + " -threads 1 -reps 2 -verify -grid 2x1"
		status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{childEnv + "=" + args}, Stdout: &out, Stderr: &errs}.Run()
		if status != 0 || resultRE.FindStringSubmatch(out.String()) == nil {
			t.Fatalf("%d processes: status %d\n%s%s", procs, status, out.String(), errs.String())
		}
	}
}

// TestUnderMpirun: started by mpirun, every process is one process of the job and starts
// nothing itself; the process of task 0 prints the result line. A mixed-kernel run, so
// that balancing crosses processes too.
func TestUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun.openmpi") // not "mpirun": MPICH registers one too
	if err != nil {
		t.Skip("mpirun.openmpi not found: install Debian's openmpi-bin to run this test")
	}
	names := cpuKernels(t)
	spec := names[0] + ":1," + names[len(names)-1]
	args := "-n 64 -nb 8 -tasks 3 -verify -kernel " + spec
	cmd := exec.Command(mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
		"-x", childEnv+"="+args, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OMPI_MCA_plm_rsh_agent=", "PRTE_MCA_plm_rsh_agent=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	want := "result: n=64 nb=8 grid=1x3 kernel=" + spec + " reps=6 tasks=3 procs=2 " // mixed kernels: balanced, 6 reps
	if strings.Count(string(out), "result: ") != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "verified=true") {
		t.Fatalf("want one line %q...verified=true, got:\n%s", want, out)
	}
}

// jsonResult is the keys of the -json object the tests read.
type jsonResult struct {
	N        int     `json:"n"`
	NB       int     `json:"nb"`
	Grid     string  `json:"grid"`
	Kernel   string  `json:"kernel"`
	Tasks    int     `json:"tasks"`
	Procs    int     `json:"procs"`
	First    float64 `json:"first-seconds"`
	FirstGF  float64 `json:"first-gflops"`
	Seconds  float64 `json:"seconds"`
	GFlops   float64 `json:"gflops"`
	Threads  int     `json:"threads"`
	Checks   string  `json:"checks"`
	Checksum string  `json:"checksum"`
	Verified bool    `json:"verified"`
}

// TestOneProcessInline: -json prints one object with the result line's keys and the
// summary's figures.
func TestOneProcessInline(t *testing.T) {
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "33", "-nb", "4", "-grid", "2x1", "-np", "1", "-kernel", "gonum", "-json"}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	var r jsonResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if !r.Verified || r.N != 33 || r.NB != 4 || r.Grid != "2x1" || r.Tasks != 2 || r.Procs != 1 || r.Kernel != "gonum" || r.GFlops <= 0 || r.FirstGF <= 0 || r.First < r.Seconds || r.Checks != "freivalds+exact" {
		t.Fatalf("unexpected result %+v", r)
	}
}

// TestDefaultBlockSize: without -nb, the block size is summa.DefaultNB for the N and grid.
func TestDefaultBlockSize(t *testing.T) {
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "100", "-grid", "2x2", "-np", "1", "-kernel", "gonum", "-json"}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	var r jsonResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if want := summa.DefaultNB(100, grid.Grid{P: 2, Q: 2}); !r.Verified || r.NB != want {
		t.Fatalf("nb %d (verified %v), want %d", r.NB, r.Verified, want)
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
		{"-kernel", "gonum:1,openblas:1", "-tasks", "3"},
		{"-kernel", "gonum,gonum"},
		{"-np", "3", "-tasks", "2"},
		{"-reps", "0"},
		{"-verify=maybe"},
		{"-split", "1,2", "-tasks", "3"},
		{"-split", "1,x"},
		{"-balance", "-grid", "2x2"},
		{"-bogus"},
		{"extra"},
		{"-n", "64", "-grid", "1000000x1000000"}, // would eat the machine describing the job
		{"-n", "64", "-tasks", "9999999"},
		{"-n", "2000000"}, // larger than this machine's memory
	}
	for _, name := range []string{"cublas", "openblas"} {
		if _, err := kernels.Get(name); err != nil {
			cases = append(cases, []string{"-kernel", name}) // registered but unavailable here
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
		if status != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "matmul: ") || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, stderr %q", args, status, out.String(), errs.String())
		}
	}
}

func TestTraceFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "20", "-nb", "6", "-grid", "1x2", "-np", "1", "-kernel", "gonum", "-trace", file}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	b, err := os.ReadFile(file)
	if err != nil || !json.Valid(b) || !bytes.Contains(b, []byte(`"a0`)) {
		t.Fatalf("trace %s: %v, %d bytes, valid JSON %v", file, err, len(b), json.Valid(b))
	}
}

// TestMixedKernels runs a job whose tasks use different CPU kernels.
func TestMixedKernels(t *testing.T) {
	names := cpuKernels(t)
	if len(names) < 2 {
		t.Skip("one CPU kernel available")
	}
	spec := names[1] + ":1," + names[0]
	var out, errs bytes.Buffer
	if status := run([]string{"-n", "32", "-nb", "4", "-tasks", "4", "-np", "1", "-kernel", spec, "-split", "1,1,1,1"}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	// The shares found: any split of the four tasks, the slow one's share 0 included (the
	// balancer tries the fast tasks alone, and keeps that split when it was the fastest).
	if !strings.Contains(out.String(), "grid=1x4 kernel="+spec+" reps=6 tasks=4 procs=1 ") || !strings.Contains(out.String(), "verified=true") ||
		!strings.Contains(out.String(), "(balanced from measured rates): "+names[1]+" ") ||
		!regexp.MustCompile(`; to start a later run from them: -split [0-9.]+(,[0-9.]+){3}\n`).MatchString(out.String()) {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
	out.Reset()
	if status := run([]string{"-n", "40", "-nb", "4", "-tasks", "2", "-np", "1", "-kernel", spec, "-split", "3,1", "-balance=false"}, &out, &errs); status != 0 {
		t.Fatalf("status %d: %s", status, errs.String())
	}
	if !strings.Contains(out.String(), "(static): "+names[1]+" 80.0%, "+names[0]+" 20.0%") || !strings.Contains(out.String(), "verified=true") {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
}

// TestKernelFallbackNote: with the default kernel (cpu) on a host without OpenBLAS, the run
// says in one line on stderr that it uses the pure-Go kernel, and how to install OpenBLAS;
// with OpenBLAS there, or a kernel named on the command line, it says nothing of the kind.
func TestKernelFallbackNote(t *testing.T) {
	const note = "apt-get install libopenblas0"
	hasOpenBLAS := slices.Contains(kernels.AvailableOn(kernels.CPU), "openblas")
	for _, args := range [][]string{
		{"-n", "16", "-np", "1", "-reps", "1"},
		{"-n", "16", "-np", "1", "-reps", "1", "-kernel", "gonum"},
	} {
		var out, errs bytes.Buffer
		if status := run(args, &out, &errs); status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, errs.String())
		}
		want := !hasOpenBLAS && !slices.Contains(args, "-kernel")
		if got := strings.Count(errs.String(), note); got != map[bool]int{true: 1, false: 0}[want] {
			t.Errorf("%v (OpenBLAS available: %v): %d lines naming %q on stderr, want them: %v\n%s", args, hasOpenBLAS, got, note, want, errs.String())
		}
	}
}

// TestFallbackNote: the note is given only for cpu or auto resolved to gonum while OpenBLAS
// is not available.
func TestFallbackNote(t *testing.T) {
	for _, c := range []struct {
		requested, chosen string
		available         []string
		want              bool
	}{
		{"cpu", "gonum", []string{"gonum"}, true},
		{"auto", "gonum", []string{"gonum"}, true},
		{"cpu", "openblas", []string{"openblas", "gonum"}, false},
		{"gonum", "gonum", []string{"gonum"}, false},
		{"gonum", "gonum", []string{"openblas", "gonum"}, false},
		{"auto", "cublas", []string{"gonum"}, false},
		{"cpu:1,gonum", "gonum", []string{"gonum"}, false},
	} {
		if got := fallbackNote(c.requested, c.chosen, c.available); (got != "") != c.want || strings.Contains(got, "\n") {
			t.Errorf("fallbackNote(%q, %q, %v) = %q, want a line: %v", c.requested, c.chosen, c.available, got, c.want)
		}
	}
}
