package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/sph/fluid"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
)

// The checkpointed job of these tests: long enough (a second or more) for a process to be
// killed after a checkpoint and well before the end, small enough to compute its reference
// at once. Its steps (ckSteps) are in race_test.go and norace_test.go: the race detector
// makes a step ten times slower.
const (
	ckN, ckTasks = 2000, 3
	ckEvery      = "30ms"
)

// ckJob is a job of the command under orwlrun with checkpoints in dir/{rank}.
type ckJob struct {
	t    *testing.T
	dir  string
	pids string
	want string // the checksum of an uninterrupted run
}

func newCkJob(t *testing.T) *ckJob {
	t.Helper()
	if _, err := killjob.Orwlrun(); err != nil {
		t.Skip(err)
	}
	s, _, _, err := fluid.Sequential(fluid.Params{N: ckN, Steps: ckSteps, Seed: 1, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &ckJob{t: t, dir: t.TempDir(), pids: t.TempDir(), want: fmt.Sprintf("%016x", s.Checksum())}
}

func (j *ckJob) args() string {
	return fmt.Sprintf("-n %d -steps %d -tasks %d -verify=false -checkpoint %s -checkpoint-every %s",
		ckN, ckSteps, ckTasks, filepath.Join(j.dir, "{rank}"), ckEvery)
}

// run runs orwlrun -np procs -restarts restarts on the command and kills the processes of
// attempt 0 of the ranks in kill after the first checkpoint is complete (killjob.Job): every
// process has then committed it. It returns orwlrun's exit status and output.
func (j *ckJob) run(procs, restarts int, kill ...int) (int, string) {
	j.t.Helper()
	bin, _ := killjob.Orwlrun()
	argv := []string{bin, "-np", strconv.Itoa(procs), "-restarts", strconv.Itoa(restarts), "-grace", "1s", os.Args[0], "-test.run=^$"}
	status, out, err := killjob.Job{Pids: j.pids, After: 1, Kill: kill}.Run(argv, childEnv+"="+j.args(), "GORACE=atexit_sleep_ms=0")
	if err != nil {
		j.t.Fatalf("%v:\n%s", err, out)
	}
	return status, out
}

// checkResult checks that the job succeeded, resumed from a checkpoint and printed the
// checksum of an uninterrupted run.
func (j *ckJob) checkResult(status int, out string) {
	j.t.Helper()
	m := regexp.MustCompile(`result: .* checksum=([0-9a-f]+) imbalance=\S+ resumed-at=(\d+)`).FindStringSubmatch(out)
	switch {
	case status != 0 || m == nil:
		j.t.Fatalf("status %d, want 0 and a result line:\n%s", status, out)
	case m[1] != j.want:
		j.t.Fatalf("checksum %s, an uninterrupted run's %s:\n%s", m[1], j.want, out)
	case m[2] == "0" || !strings.Contains(out, "resumed from checkpoint"):
		j.t.Fatalf("the job did not resume from a checkpoint:\n%s", out)
	}
}

// TestKilledProcessResumes: orwlrun -np 2 -restarts 2, one random process killed at a
// random moment after a checkpoint is complete: the job restarts from the checkpoint (the
// particles of every task, those in transit between tasks, the cells each owns) and ends
// with the checksum of an uninterrupted run.
func TestKilledProcessResumes(t *testing.T) {
	j := newCkJob(t)
	rank := rand.N(2)
	status, out := j.run(2, 2, rank)
	if !strings.Contains(out, fmt.Sprintf("attempt 0: rank %d failed (signal: killed", rank)) {
		t.Fatalf("orwlrun did not restart after rank %d was killed:\n%s", rank, out)
	}
	j.checkResult(status, out)
}

// TestWholeJobRestartsOnFewerProcesses: every process of 3 killed at once, then the job
// started again on 2 processes ends with the checksum of an uninterrupted run.
func TestWholeJobRestartsOnFewerProcesses(t *testing.T) {
	j := newCkJob(t)
	if status, out := j.run(3, 0, 0, 1, 2); status == 0 {
		t.Fatalf("the job succeeded with every process killed:\n%s", out)
	}
	j.checkResult(j.run(2, 0))
}
