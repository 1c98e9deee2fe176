package orwl

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/orwl-go/orwl/internal/jobenv"
)

// A job oversubscribes its host when its processes there outnumber the cores, or when the
// launcher does not say how many share it; its processes have many schedulers when they do
// not, but their schedulers there (GOMAXPROCS each) outnumber the cores.
func TestJobOversubscribed(t *testing.T) {
	cores, procs := runtime.NumCPU(), runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		local      int
		over, many bool
	}{
		{0, true, false},
		{1, false, procs > cores},
		{cores/procs + 1, cores/procs+1 > cores, cores/procs+1 <= cores},
		{cores + 1, true, false},
	} {
		j := &job{info: jobenv.Job{LocalSize: c.local}}
		if over, many := j.oversubscribed(), j.manySchedulers(); over != c.over || many != c.many {
			t.Errorf("%d local processes of %d schedulers on %d cores: oversubscribed %v, many schedulers %v, want %v and %v", c.local, procs, cores, over, many, c.over, c.many)
		}
	}
}

// A launcher that says how many cores the job has on this host (SLURM_CPUS_ON_NODE) is
// believed over the cores this process may run on: tasks that srun bound to a core each
// are no job of two processes on one core, and a job given fewer cores than the process
// sees is oversubscribed by fewer processes.
func TestJobCoresFromLauncher(t *testing.T) {
	cores := runtime.NumCPU()
	for _, c := range []struct {
		local, given int
		over         bool
	}{
		{2 * cores, 4 * cores, false},
		{2, 1, true},
		{cores + 1, cores + 1, false},
	} {
		j := &job{info: jobenv.Job{LocalSize: c.local, Cores: c.given, Bound: true}}
		if over := j.oversubscribed(); over != c.over {
			t.Errorf("%d local processes, %d cores given by the launcher, %d seen: oversubscribed %v, want %v", c.local, c.given, cores, over, c.over)
		}
	}
}

// TestFailureReasonNotACancelledTask: a job that heard first only that another process
// failed (a reason that yields) cancels its tasks; a task that then returns its context's
// error gives no better reason, and the report of why, when it comes, replaces the first.
// (Before, the task's "context canceled" replaced it and spread to the other processes.)
func TestFailureReasonNotACancelledTask(t *testing.T) {
	j, err := newJob(Config{Tasks: 1, Locations: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	j.cancel = cancel
	news := &peerFailure{rank: 3, msg: "closed its mesh", yields: true}
	j.fail(news)
	<-ctx.Done()
	j.fail(fmt.Errorf("task 0: %w", ctx.Err()))
	if j.err != news {
		t.Fatalf("after the task's context error the job's error is %v, want %v", j.err, news)
	}
	why := &peerFailure{rank: 5, msg: "boom"}
	j.fail(why)
	if j.err != why {
		t.Fatalf("after the report of why the job's error is %v, want %v", j.err, why)
	}
}
