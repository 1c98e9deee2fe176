package orwl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/orwl"
)

// TestPlainDirectorySharedByTheJob: a checkpoint directory without "{rank}" is the job's:
// its processes (in one process here, which flock alike) keep their checkpoints in it side
// by side, and the job restarted on another number of processes resumes from them with the
// values of an uninterrupted run.
func TestPlainDirectorySharedByTheJob(t *testing.T) {
	const tasks, iters = 4, 3000
	want, err := (&ckptRing{tasks: tasks, iters: iters}).run(t, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(memDir(t), "job")
	failing := &ckptRing{tasks: tasks, iters: iters, dir: dir, failAfter: true}
	restarted := &ckptRing{tasks: tasks, iters: iters, dir: dir}
	restartRing(t, want, 2, 3, failing, restarted, func() {})
}

// TestDirectoryOfARunningJobIsRefused: a second run of a job on the directory of a run still
// going is refused at its start, naming the process that holds the directory and saying
// what to do; the run going on is not disturbed.
func TestDirectoryOfARunningJobIsRefused(t *testing.T) {
	dir := filepath.Join(memDir(t), "job")
	cfg := orwl.Config{Tasks: 1, Locations: []string{"v"}, Checkpoint: orwl.Checkpoint{Dir: dir, Every: time.Hour, Program: "held"}}
	var second error
	err := orwl.Run(context.Background(), cfg, func(ctx context.Context, t *orwl.Task) error {
		if err := t.Schedule(ctx); err != nil {
			return err
		}
		second = orwl.Run(ctx, cfg, func(context.Context, *orwl.Task) error { return nil })
		return nil
	})
	if err != nil {
		t.Fatalf("the first run: %v", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{filepath.Join(dir, "rank-0"), fmt.Sprintf("in use by pid %d on host %s (program held", os.Getpid(), host), "a directory of its own"} {
		if second == nil || !strings.Contains(second.Error(), want) {
			t.Fatalf("the second run: %v, want an error naming %q", second, want)
		}
	}
}
