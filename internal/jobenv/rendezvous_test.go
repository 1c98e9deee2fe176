package jobenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/pmi"
	"github.com/orwl-go/orwl/internal/testemu/pmitest"
)

// pmiJob serves a job of size processes with a test PMI server and returns each rank's
// environment (the launcher's variables, plus more), as Hydra or srun --mpi=pmi2 would set
// them.
func pmiJob(t *testing.T, size int, more ...string) (srv *pmitest.Server, envs []LookupFunc) {
	t.Helper()
	exchanges.Clear() // descriptor numbers are reused from test to test
	srv = pmitest.NewServer(size)
	t.Cleanup(srv.Close)
	for rank := range size {
		f, err := srv.Socket(rank)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Dup(int(f.Fd())) // Rendezvous takes the descriptor over
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) }) // in case Rendezvous was not called
		envs = append(envs, env(append([]string{"PMI_FD=" + strconv.Itoa(fd), "PMI_RANK=" + strconv.Itoa(rank),
			"PMI_SIZE=" + strconv.Itoa(size)}, more...)...))
	}
	return srv, envs
}

// rendezvous runs Discover and Rendezvous for every rank at once, as the processes of a job
// would, and returns their jobs and rank 0's listener.
func rendezvous(t *testing.T, envs []LookupFunc) ([]Job, net.Listener, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	jobs := make([]Job, len(envs))
	errs := make([]error, len(envs))
	var ln net.Listener
	var wg sync.WaitGroup
	for rank, e := range envs {
		wg.Go(func() {
			j, err := Discover(Explicit{}, e)
			if err != nil {
				errs[rank] = err
				return
			}
			l, err := j.Rendezvous(ctx, nil)
			jobs[rank], errs[rank] = j, err
			if rank == 0 {
				ln = l
			} else if l != nil {
				errs[rank] = fmt.Errorf("rank %d got a listener", rank)
			}
		})
	}
	wg.Wait()
	if ln != nil {
		t.Cleanup(func() { ln.Close() })
	}
	return jobs, ln, errs
}

// Under a PMI launcher, every rank ends with rank 0's coordinator address, which rank 0
// listens on, and one random secret; nothing is derived.
func TestRendezvousPMI(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		loopback bool
	}{
		{"hydra, one host", []string{"MPI_LOCALNRANKS=3"}, true},
		{"hydra, one host, PMI-2", []string{"MPI_LOCALNRANKS=3", "ORWL_PMI=2"}, true},
		{"srun --mpi=pmi2, rank 0 on the second node", []string{"SLURM_STEP_ID=0", "SLURM_JOB_ID=5", "PMI_JOBID=5.0",
			"SLURM_STEP_NODELIST=vm[1-3]", "SLURMD_NODENAME=vm2", "SLURM_STEP_TASKS_PER_NODE=1(x3)"}, false},
		{"several hosts, ORWL_LISTEN", []string{"MPI_LOCALNRANKS=1", "ORWL_LISTEN=127.0.0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, envs := pmiJob(t, 3, tc.env...)
			jobs, ln, errs := rendezvous(t, envs)
			for rank, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", rank, err)
				}
			}
			if ln == nil {
				t.Fatal("rank 0 has no listener")
			}
			_, port, _ := net.SplitHostPort(jobs[0].Coord)
			if port != strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) {
				t.Errorf("rank 0 listens on %s but published %s", ln.Addr(), jobs[0].Coord)
			}
			host, _, _ := net.SplitHostPort(jobs[0].Coord)
			if isLoopback(host) != tc.loopback || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
				t.Errorf("rank 0 published %s; loopback wanted: %v", jobs[0].Coord, tc.loopback)
			}
			for rank, j := range jobs {
				if j.Coord != jobs[0].Coord || !bytes.Equal(j.Secret, jobs[0].Secret) || len(j.Secret) != 64 || j.WeakSecret || j.CoordFrom != CoordPMI {
					t.Errorf("rank %d: coordinator %s, secret %q (weak %v, from %s); rank 0: %s, %q", rank, j.Coord, j.Secret, j.WeakSecret, j.CoordFrom, jobs[0].Coord, jobs[0].Secret)
				}
			}
			srv.Close()
			if err := srv.Wait(); err != nil {
				t.Fatal(err)
			}
			// A later job in the same processes reuses the exchange: rank 0 listens again.
			ln.Close()
			j := jobs[0]
			j.Coord, j.Secret = "", nil
			again, err := j.Rendezvous(context.Background(), nil)
			if err != nil {
				t.Fatalf("second rendezvous: %v", err)
			}
			again.Close()
			if j.Coord != jobs[0].Coord || !bytes.Equal(j.Secret, jobs[0].Secret) {
				t.Errorf("second rendezvous: %s %q, first %s %q", j.Coord, j.Secret, jobs[0].Coord, jobs[0].Secret)
			}
		})
	}
}

// A secret set by hand is kept; only the coordinator goes through PMI.
func TestRendezvousPMIKeepsGivenSecret(t *testing.T) {
	_, envs := pmiJob(t, 2, "MPI_LOCALNRANKS=2", "ORWL_SECRET=by-hand")
	jobs, _, errs := rendezvous(t, envs)
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		if string(jobs[rank].Secret) != "by-hand" || jobs[rank].Coord != jobs[0].Coord {
			t.Errorf("rank %d: secret %q, coordinator %s", rank, jobs[rank].Secret, jobs[rank].Coord)
		}
	}
}

func TestRendezvousPMIErrors(t *testing.T) {
	// The launcher is gone: the error names the connection and how to do without it.
	srv, envs := pmiJob(t, 2, "MPI_LOCALNRANKS=2")
	srv.Close()
	_, _, errs := rendezvous(t, envs)
	for rank, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "PMI_FD=") || !strings.Contains(err.Error(), "ORWL_PMI=off") {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
	// A process never comes to the fence: the others give up when ctx ends, saying so.
	_, envs = pmiJob(t, 3, "MPI_LOCALNRANKS=3")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errs = make([]error, 2)
	var wg sync.WaitGroup
	for rank, e := range envs[:2] {
		wg.Go(func() {
			j, err := Discover(Explicit{}, e)
			if err == nil {
				var ln net.Listener
				if ln, err = j.Rendezvous(ctx, nil); ln != nil {
					ln.Close()
				}
			}
			errs[rank] = err
		})
	}
	wg.Wait()
	for rank, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did a process of the job fail") || !strings.Contains(err.Error(), "cmd=barrier_in") {
			t.Errorf("rank %d without rank 2: %v", rank, err)
		}
	}
	// The server and the environment disagree on the size.
	_, envs = pmiJob(t, 2, "MPI_LOCALNRANKS=2", "ORWL_PMI=2")
	j, err := Discover(Explicit{}, func(k string) (string, bool) {
		if k == "PMI_SIZE" {
			return "5", true
		}
		return envs[1](k)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Rendezvous(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "rank 1 of 2") || !strings.Contains(err.Error(), "rank 1 of 5") {
		t.Errorf("size mismatch: %v", err)
	}
}

// Rank 0 warns once, on its logger, when the secret is derived from the job id; the other
// ranks do not.
func TestWeakSecretWarning(t *testing.T) {
	weakWarned.Store(false)
	defer weakWarned.Store(false)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	id := fmt.Sprintf("weak-%d", time.Now().UnixNano())
	for _, rank := range []string{"1", "0", "0"} {
		j, err := Discover(Explicit{}, env("OMPI_COMM_WORLD_RANK="+rank, "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE="+id))
		if err != nil {
			t.Fatal(err)
		}
		if !j.WeakSecret {
			t.Fatal("secret not derived")
		}
		ln, err := j.Rendezvous(context.Background(), log)
		if err != nil {
			t.Fatal(err)
		}
		if ln != nil {
			ln.Close()
		}
		if rank == "1" && logged.Len() > 0 {
			t.Fatalf("rank 1 warned: %s", logged.String())
		}
	}
	out := logged.String()
	if strings.Count(out, "level=WARN") != 1 {
		t.Fatalf("want one warning, got:\n%s", out)
	}
	for _, want := range []string{"derived from the openmpi job id", id, "export ORWL_SECRET=", "-x ORWL_SECRET", "srun --mpi=pmi2"} {
		if !strings.Contains(out, want) {
			t.Errorf("warning lacks %q:\n%s", want, out)
		}
	}
}

// A derived port that is taken is reported as such, with the fix.
func TestDerivedPortTaken(t *testing.T) {
	id := fmt.Sprintf("taken-%d", time.Now().UnixNano())
	j, err := Discover(Explicit{}, env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE="+id, "ORWL_SECRET=s"))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := net.Listen("tcp", j.Coord)
	if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatal(err)
	}
	if holder != nil {
		defer holder.Close()
	}
	_, err = j.Rendezvous(context.Background(), nil)
	if !errors.Is(err, ErrCoordTaken) {
		t.Fatalf("error %v, want ErrCoordTaken", err)
	}
	for _, want := range []string{j.Coord, "port is taken", "export ORWL_COORD=host:port", id} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if holder != nil {
		holder.Close()
		ln, err := j.Rendezvous(context.Background(), nil)
		if err != nil {
			t.Fatalf("free derived port: %v", err)
		}
		ln.Close()
	}
}

// Under srun without PMI, rank 0 on another node than the node list's first fails at once,
// saying what to do.
func TestRankZeroOnWrongNode(t *testing.T) {
	slurm := []string{"SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_ID=0", "SLURM_JOB_ID=41", "SLURM_STEP_NODELIST=orh[1-3]", "ORWL_SECRET=s"}
	j, err := Discover(Explicit{}, env(append(slurm, "SLURMD_NODENAME=orh2")...))
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Rendezvous(context.Background(), nil)
	if !errors.Is(err, ErrWrongNode) {
		t.Fatalf("error %v, want ErrWrongNode", err)
	}
	for _, want := range []string{"rank 0 runs on orh2", "first node is orh1", "srun --mpi=pmi2", "export ORWL_COORD=host:port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// Another rank on another node has nothing to check.
	slurm[0] = "SLURM_PROCID=1"
	j, err = Discover(Explicit{}, env(append(slurm, "SLURMD_NODENAME=orh3")...))
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := j.Rendezvous(context.Background(), nil); ln != nil || err != nil {
		t.Errorf("rank 1: %v, %v", ln, err)
	}
	// Rank 0 on the first node listens there.
	j, err = Discover(Explicit{}, env("SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_ID=0", "SLURM_JOB_ID=41",
		"SLURM_STEP_NODELIST=localhost,orh2", "SLURMD_NODENAME=localhost.localdomain", "ORWL_SECRET=s"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := j.Rendezvous(context.Background(), nil)
	if err != nil && !errors.Is(err, ErrCoordTaken) {
		t.Fatalf("rank 0 on the first node: %v", err)
	}
	if ln != nil {
		ln.Close()
	}
}

func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"n1", "n1", true}, {"n1", "N1.cluster", true}, {"n1.a", "n1.b", true}, {"n1", "n2", false}, {"10.0.0.1", "10.0.0.2", false}} {
		if got := sameHost(tc.a, tc.b); got != tc.want {
			t.Errorf("sameHost(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// ORWL_LISTEN may name a network interface: every rank listens on its address, and rank 0
// publishes it.
func TestListenOnInterface(t *testing.T) {
	ifc, addr := "", ""
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() && n.IP.To4() != nil && i.Flags&net.FlagUp != 0 && addr == "" {
				ifc, addr = i.Name, n.IP.String()
			}
		}
	}
	if ifc == "" {
		t.Skip("no interface with a global IPv4 address here")
	}
	_, envs := pmiJob(t, 2, "MPI_LOCALNRANKS=1", "ORWL_LISTEN="+ifc)
	jobs, _, errs := rendezvous(t, envs)
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		if jobs[rank].Listen != addr || !strings.HasPrefix(jobs[rank].Coord, addr+":") {
			t.Errorf("rank %d: listen %s, coordinator %s; want %s, the address of %s", rank, jobs[rank].Listen, jobs[rank].Coord, addr, ifc)
		}
	}
	j := Job{Rank: 1, Size: 2, Listen: "lo", CoordFD: -1}
	if _, err := j.Rendezvous(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "ORWL_LISTEN=lo") {
		t.Errorf("an interface without a global address: %v", err)
	}
}

// A coordinator address that rank 0 publishes malformed fails the other ranks, naming it.
func TestRendezvousPMIBadCoordinator(t *testing.T) {
	_, envs := pmiJob(t, 2, "MPI_LOCALNRANKS=2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j0, err := Discover(Explicit{}, envs[0])
	if err != nil {
		t.Fatal(err)
	}
	j1, err := Discover(Explicit{}, envs[1])
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var err0 error
	wg.Go(func() { // rank 0, played by hand
		c, err := pmi.Dial(ctx, *j0.PMI)
		if err != nil {
			err0 = err
			return
		}
		defer c.Close()
		for _, step := range []func() error{
			func() error { return c.Put(ctx, KeyCoord, "nohostport") },
			func() error { return c.Put(ctx, KeySecret, "s") },
			func() error { return c.Fence(ctx) },
			func() error { return c.Finalize(ctx) },
		} {
			if err0 = step(); err0 != nil {
				return
			}
		}
	})
	ln, err := j1.Rendezvous(ctx, nil)
	wg.Wait()
	if err0 != nil {
		t.Fatal(err0)
	}
	if ln != nil || err == nil || !strings.Contains(err.Error(), `rank 0 published the coordinator "nohostport"`) || !strings.Contains(err.Error(), "ORWL_PMI=off") {
		t.Fatalf("rank 1: %v, %v; want an error naming the published coordinator", ln, err)
	}
}
