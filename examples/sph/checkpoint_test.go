package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/sph/fluid"
)

// The checkpointed job of these tests: long enough (a second or more) for a process to be
// killed after a checkpoint and well before the end, small enough to compute its reference
// at once. Its steps (ckSteps) are in race_test.go and norace_test.go: the race detector
// makes a step ten times slower.
const (
	ckN, ckTasks = 2000, 3
	ckEvery      = "30ms"
)

// pidsEnv names a directory where a child process of this test binary writes its process
// id, in a file named RANK.ATTEMPT, so that a test can kill it.
const pidsEnv = "SPH_TEST_PIDS"

// writePid writes this process's id where pidsEnv says, if it says.
func writePid() {
	if dir := os.Getenv(pidsEnv); dir != "" {
		name := filepath.Join(dir, os.Getenv("ORWL_RANK")+"."+os.Getenv("ORWL_ATTEMPT"))
		os.WriteFile(name, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
}

// orwlrun builds cmd/orwlrun once for the tests of this package and returns its path.
var orwlrun = sync.OnceValues(func() (string, error) { return build("github.com/orwl-go/orwl/cmd/orwlrun", "orwlrun") })

// ckJob is a job of the command under orwlrun with checkpoints in dir/{rank}.
type ckJob struct {
	t    *testing.T
	dir  string
	pids string
	want string // the checksum of an uninterrupted run
}

func newCkJob(t *testing.T) *ckJob {
	t.Helper()
	if _, err := orwlrun(); err != nil {
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

// run runs orwlrun -np procs -restarts restarts on the command. After the second checkpoint
// is complete, at a random moment within 50ms, it kills (SIGKILL) the processes of attempt
// 0 of the ranks in kill. It returns orwlrun's exit status and output.
//
// Not after the first: rank 0 says a checkpoint is complete when every process has written
// its pieces, and the others may not have committed their manifests yet; killed then, the
// job has no complete checkpoint and rightly starts afresh. A process commits checkpoint k
// before it takes part in checkpoint k+1, so once the second is complete the first is
// committed everywhere.
func (j *ckJob) run(procs, restarts int, kill ...int) (int, string) {
	j.t.Helper()
	bin, _ := orwlrun()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-np", strconv.Itoa(procs), "-restarts", strconv.Itoa(restarts), "-grace", "1s", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+j.args(), pidsEnv+"="+j.pids, "GORACE=atexit_sleep_ms=0")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		j.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	var out strings.Builder
	killed := make(chan error, 1)
	complete := 0
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "checkpoint complete") {
			complete++
		}
		if len(kill) > 0 && complete == 2 {
			ranks := kill
			kill = nil
			time.AfterFunc(rand.N(50*time.Millisecond), func() { killed <- j.kill(ranks) })
		}
	}
	cmd.Wait()
	if ctx.Err() != nil {
		j.t.Fatalf("orwlrun did not end within 2 minutes:\n%s", out.String())
	}
	if kill != nil {
		j.t.Fatalf("fewer than two checkpoints were complete:\n%s", out.String())
	}
	select {
	case err := <-killed:
		if err != nil {
			j.t.Fatalf("%v\n%s", err, out.String())
		}
	default:
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// kill kills the processes of attempt 0 of ranks.
func (j *ckJob) kill(ranks []int) error {
	for _, r := range ranks {
		b, err := os.ReadFile(filepath.Join(j.pids, strconv.Itoa(r)+".0"))
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(string(b))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("killing rank %d (pid %d): %w", r, pid, err)
		}
	}
	return nil
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
