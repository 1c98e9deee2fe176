package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

func TestStencilLayouts(t *testing.T) {
	got, err := stencilLayouts("", 2)
	if want := []stencilLayout{{1, 2, 1}, {2, 2, 1}, {2, 1, 2}}; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("default layouts of 2 processes: %v, %v; want %v", got, err, want)
	}
	if got, err := stencilLayouts("line,3x2", 4); err != nil || fmt.Sprint(got) != "[{1 4 1} {2 3 2}]" {
		t.Fatalf("line,3x2: %v, %v", got, err)
	}
	for _, bad := range []string{"plane", "2x", "0x2", "2x2x", ","} {
		if _, err := stencilLayouts(bad, 2); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestStencilSized(t *testing.T) {
	for _, c := range []struct {
		l      stencilLayout
		cells  int
		single bool
		want   jacobi.Params
	}{
		{stencilLayout{1, 2, 1}, 1000, false, jacobi.Params{Dim: 1, NX: 2000, NY: 1, PX: 2, PY: 1}},
		{stencilLayout{1, 2, 1}, 1000, true, jacobi.Params{Dim: 1, NX: 1000, NY: 1, PX: 1, PY: 1}},
		{stencilLayout{2, 2, 1}, 1000, false, jacobi.Params{Dim: 2, NX: 64, NY: 32, PX: 2, PY: 1}},
		{stencilLayout{2, 1, 2}, 4000000, false, jacobi.Params{Dim: 2, NX: 2000, NY: 4000, PX: 1, PY: 2}},
	} {
		if got := c.l.sized(c.cells, c.single); got != c.want {
			t.Errorf("%v sized(%d, %v) = %+v, want %+v", c.l, c.cells, c.single, got, c.want)
		}
	}
}

// TestMPIStencilMatchesJacobi runs the C MPI reference on lines and planes cut in various
// ways and compares its checksum with the sequential sweep of package jacobi: the peer of
// the bench computes exactly the same thing. Skipped without Open MPI's mpicc and mpirun.
func TestMPIStencilMatchesJacobi(t *testing.T) {
	mpi, err := findOpenMPI()
	if err != nil {
		t.Skip(err)
	}
	bin := buildOrSkip(t, mpi, "stencil", stencilSource, "-O2")
	for _, p := range []jacobi.Params{
		{Dim: 1, NX: 1000, NY: 1, PX: 1, PY: 1, Iters: 30},
		{Dim: 1, NX: 1001, NY: 1, PX: 3, PY: 1, Iters: 31},
		{Dim: 2, NX: 23, NY: 17, PX: 2, PY: 1, Iters: 20},
		{Dim: 2, NX: 23, NY: 17, PX: 1, PY: 2, Iters: 20},
		{Dim: 2, NX: 23, NY: 17, PX: 2, PY: 2, Iters: 21},
	} {
		args := []string{strconv.Itoa(p.Dim), strconv.Itoa(p.NX), strconv.Itoa(p.NY), strconv.Itoa(p.PX), strconv.Itoa(p.PY), strconv.Itoa(p.Iters)}
		for _, btl := range []string{"tcp", mpi.shm} {
			r, err := runMPIStencil(mpi, bin, btl, p.Tasks(), args)
			if err != nil {
				t.Fatalf("%+v over %s: %v", p, btl, err)
			}
			if want := fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p))); r.Checksum != want {
				t.Fatalf("%+v over %s: checksum %s, jacobi's %s", p, btl, r.Checksum, want)
			}
			if r.PerIteration <= 0 {
				t.Fatalf("%+v over %s: %v per iteration", p, btl, r.PerIteration)
			}
		}
	}
}

func TestStencilFigures(t *testing.T) {
	rows := []stencilRow{
		{Kind: "halo", Layout: "line", Grid: "2x1", CellsPerTask: 1000, Checked: true,
			Seconds: map[string]float64{"orwl": 30e-6, "mpi-tcp": 10e-6, "mpi-shm": 2e-6},
			Ratio:   map[string]float64{"orwl/mpi-tcp": 3, "orwl/mpi-shm": 15}},
		{Kind: "loop", Layout: "line", Grid: "1x1", CellsPerTask: 1000, Checked: true,
			Seconds: map[string]float64{"go": 1.1e-6, "c": 1e-6}, Ratio: map[string]float64{"go/c": 1.1}},
		{Kind: "halo", Layout: "plane", Grid: "1x2", CellsPerTask: 1024, Checked: false,
			Seconds: map[string]float64{"orwl": 40e-6}, Ratio: map[string]float64{}},
		{Kind: "over", Layout: "line", Grid: "4x1", CellsPerTask: 10000, Checked: true,
			Seconds: map[string]float64{"orwl": 40e-6, "mpi-shm": 30e-6}, Ratio: map[string]float64{"orwl/mpi-shm": 4.0 / 3}},
	}
	got := stencilFigures(rows)
	for _, want := range []string{
		"| line (3-point), tasks 2x1 | 1000 | 30µs | 10µs | 3.00x | 2µs | 15.00x |",
		"| line (3-point) | 1000 | 1.1µs | 1µs | 1.10x |",
		"| plane (5-point), tasks 1x2 (checksums differ) | 1024 | 40µs | not installed | - | not installed | - |",
		"| line (3-point), tasks 4x1 | 10000 | 40µs | 30µs | 1.33x |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// TestTwoJobs: the two jobs run at the same time (each waits for the other to start), the
// slower one's time is reported, differing checksums and errors are kept.
func TestTwoJobs(t *testing.T) {
	run := func(times []float64, sums []string, fail error) func() (stencilRun, error) {
		var started sync.WaitGroup
		started.Add(2)
		both := make(chan struct{})
		go func() { started.Wait(); close(both) }()
		var mu sync.Mutex
		i := 0
		return func() (stencilRun, error) {
			started.Done()
			select {
			case <-both:
			case <-time.After(10 * time.Second):
				return stencilRun{}, errors.New("the two jobs did not run at the same time")
			}
			mu.Lock()
			defer mu.Unlock()
			r := stencilRun{PerIteration: times[i], Checksum: sums[i]}
			i++
			if i == 2 {
				return r, fail
			}
			return r, nil
		}
	}
	r, err := twoJobs(run([]float64{2, 3}, []string{"a", "a"}, nil))()
	if err != nil || r.PerIteration != 3 || r.Checksum != "a" {
		t.Fatalf("got %+v, %v; want the slower time 3 and checksum a", r, err)
	}
	if r, _ := twoJobs(run([]float64{3, 2}, []string{"a", "b"}, nil))(); r.PerIteration != 3 || r.Checksum == "a" || r.Checksum == "b" {
		t.Fatalf("differing checksums: got %+v", r)
	}
	if _, err := twoJobs(run([]float64{1, 1}, []string{"a", "a"}, errors.New("job failed")))(); err == nil || !strings.Contains(err.Error(), "job failed") {
		t.Fatalf("a failed job: %v", err)
	}
}

// TestStencilContendersTCP checks that -tcp=false leaves MPI over TCP out of the halo rows
// only, and that without Open MPI a row has only its own contender.
func TestStencilContendersTCP(t *testing.T) {
	mpi := &openMPI{shm: "vader"}
	p := jacobi.Params{Dim: 1, NX: 2000, NY: 1, PX: 2, PY: 1, Iters: 20}
	for _, c := range []struct {
		kind string
		mpi  *openMPI
		tcp  bool
		want string
	}{
		{"halo", mpi, true, "orwl mpi-tcp mpi-shm"},
		{"halo", mpi, false, "orwl mpi-shm"},
		{"halo", nil, true, "orwl"},
		{"over", mpi, true, "orwl mpi-shm"},
		{"loop", mpi, false, "go c"},
	} {
		var names []string
		for _, s := range stencilContenders(c.kind, p, c.mpi, "stencil", c.tcp) {
			names = append(names, s.name)
		}
		if got := strings.Join(names, " "); got != c.want {
			t.Errorf("%s row, tcp %v, Open MPI %v: contenders %q, want %q", c.kind, c.tcp, c.mpi != nil, got, c.want)
		}
	}
}
