package orwl

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orwl-go/orwl/internal/hostcpu"
	"github.com/orwl-go/orwl/internal/jobenv"
)

// A process that its launcher bound to cores of its own sees fewer cores than the job's
// processes on the host share: two processes bound to a core each do not oversubscribe a
// host of two, while two that share one core do. The check runs in a child process started
// on one core (it inherits the starting thread's cores), where runtime.NumCPU is 1.
func TestJobBoundByLauncher(t *testing.T) {
	if os.Getenv("ORWL_TEST_BOUND_CHILD") != "" {
		for _, bound := range []bool{true, false} {
			j := &job{info: jobenv.Job{LocalSize: 2, Bound: bound}}
			fmt.Printf("bound=%v cores=%d oversubscribed=%v\n", bound, runtime.NumCPU(), j.oversubscribed())
		}
		return
	}
	if hostcpu.Online() < 2 {
		t.Skip("needs two cores")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJobBoundByLauncher$", "-test.v")
	cmd.Env = append(os.Environ(), "ORWL_TEST_BOUND_CHILD=1")
	out, err := startOnOneCore(cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"bound=true cores=1 oversubscribed=false", "bound=false cores=1 oversubscribed=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("the child on one core did not print %q:\n%s", want, out)
		}
	}
}

// startOnOneCore runs cmd with the first core this process may run on as its only one,
// and returns its output.
func startOnOneCore(cmd *exec.Cmd) (string, error) {
	runtime.LockOSThread() // the child inherits this thread's cores
	defer runtime.UnlockOSThread()
	var mine, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		return "", err
	}
	for c := 0; ; c++ {
		if mine.IsSet(c) {
			one.Set(c)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &mine); err == nil {
		err = rerr
	}
	if err == nil {
		err = cmd.Wait()
	}
	return buf.String(), err
}

// placeOnCores leaves a process that its launcher confined to its share of the job's cores
// as it is: its cores and its GOMAXPROCS (here the launcher gave two processes twice the
// cores this one may run on; taken for the host's, rank 0 of two would take the first
// core, and half of its schedulers); one that may run on more is placed.
func TestPlaceOnCoresShare(t *testing.T) {
	runtime.LockOSThread() // the cores looked at are this thread's
	defer runtime.UnlockOSThread()
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	unbind := placeOnCores(0, 2, 2, 2*runtime.NumCPU(), slog.New(slog.DiscardHandler))
	afterProcs := runtime.GOMAXPROCS(0)
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	unbind()
	runtime.GOMAXPROCS(procs)
	if after != before || afterProcs != procs {
		t.Errorf("a process bound by its launcher: %d cores and GOMAXPROCS %d became %d and %d", before.Count(), procs, after.Count(), afterProcs)
	}

	// One that may run on all the cores that two share (Open MPI's --bind-to socket) is
	// placed: half of them as schedulers, and bound to the first where they are two.
	cores := runtime.NumCPU()
	if _, set := os.LookupEnv("GOMAXPROCS"); set || cores < 2 {
		return
	}
	unbind = placeOnCores(0, 2, 2, cores, slog.New(slog.DiscardHandler))
	afterProcs = runtime.GOMAXPROCS(0)
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	unbind()
	runtime.GOMAXPROCS(procs)
	want := cores
	if cores == 2 {
		want = 1
	}
	if afterProcs != cores/2 || after.Count() != want {
		t.Errorf("a process that may run on the %d cores two share: GOMAXPROCS %d and %d cores, want %d and %d", cores, afterProcs, after.Count(), cores/2, want)
	}
}
