package orwl_test

import (
	"path/filepath"
	"testing"
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
