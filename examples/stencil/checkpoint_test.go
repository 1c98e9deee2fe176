package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/stencil/jacobi"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
)

// The checkpointed job of these tests: long enough (seconds under the race detector) for
// a process to be killed after a checkpoint and well before the end, small enough to
// compute its reference at once.
const (
	ckN, ckIters = 30000, 6000
	ckEvery      = "30ms"
)

// ckJob is a job of the stencil under orwlrun with checkpoints in dir/{rank}, or in dir
// itself, the job's directory, when plain.
type ckJob struct {
	t     *testing.T
	dir   string
	plain bool
	pids  string
	p     jacobi.Params
	want  string // the checksum of an uninterrupted run
}

func newCkJob(t *testing.T) *ckJob {
	t.Helper()
	if _, err := killjob.Orwlrun(); err != nil {
		t.Skip(err)
	}
	j := &ckJob{t: t, dir: t.TempDir(), pids: t.TempDir()}
	var err error
	if j.p, err = params(strconv.Itoa(ckN), grid.Grid{}, 3, ckIters); err != nil {
		t.Fatal(err)
	}
	j.want = fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(j.p)))
	return j
}

// args returns the stencil's arguments for the job, with -n n.
func (j *ckJob) args(n int) string {
	pattern := filepath.Join(j.dir, "{rank}")
	if j.plain {
		pattern = j.dir
	}
	return fmt.Sprintf("-n %d -tasks 3 -iters %d -verify=false -checkpoint %s -checkpoint-every %s",
		n, j.p.Iters, pattern, ckEvery)
}

// run runs orwlrun -np procs -restarts restarts on the stencil with args (see launch).
func (j *ckJob) run(procs, restarts int, args string, kill ...int) (int, string) {
	j.t.Helper()
	bin, _ := killjob.Orwlrun()
	return j.launch([]string{bin, "-np", strconv.Itoa(procs), "-restarts", strconv.Itoa(restarts), "-grace", "1s"}, args, kill...)
}

// launch runs the stencil with args under the launcher argv (the program follows it).
// After the first checkpoint is complete, at a random moment within 50ms, it kills
// (SIGKILL) the processes of attempt 0 of the ranks in kill (killjob.Job). It returns the
// launcher's exit status and output.
func (j *ckJob) launch(argv []string, args string, kill ...int) (int, string) {
	j.t.Helper()
	argv = append(argv, os.Args[0], "-test.run=^$")
	status, out, err := killjob.Job{Pids: j.pids, After: 1, Kill: kill}.Run(argv, childEnv+"="+args,
		"GORACE=atexit_sleep_ms=0", "OMPI_MCA_plm_rsh_agent=", "PRTE_MCA_plm_rsh_agent=")
	if err != nil {
		j.t.Fatalf("%v:\n%s", err, out)
	}
	return status, out
}

// startPiped starts cmd, its standard output and error going to the pipe it returns.
func startPiped(t *testing.T, cmd *exec.Cmd) io.Reader {
	t.Helper()
	pipe, err := killjob.StartPiped(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

// checkResult checks that the job succeeded, resumed from a checkpoint and printed the
// checksum of an uninterrupted run.
func (j *ckJob) checkResult(status int, out string) {
	j.t.Helper()
	m := regexp.MustCompile(`result: .* checksum=([0-9a-f]+) resumed-at=(\d+)`).FindStringSubmatch(out)
	switch {
	case status != 0 || m == nil:
		j.t.Fatalf("status %d, want 0 and a result line:\n%s", status, out)
	case m[1] != j.want:
		j.t.Fatalf("checksum %s, an uninterrupted run's %s:\n%s", m[1], j.want, out)
	case m[2] == "0" || !strings.Contains(out, "resumed from checkpoint: iteration="):
		j.t.Fatalf("the job did not resume from a checkpoint:\n%s", out)
	}
}

// TestKilledProcessResumes: orwlrun -np 3 -restarts 3, one random process killed at a
// random moment after a checkpoint is complete: the job restarts from the checkpoint and
// ends with the checksum of an uninterrupted run.
func TestKilledProcessResumes(t *testing.T) {
	j := newCkJob(t)
	rank := rand.N(3)
	status, out := j.run(3, 3, j.args(ckN), rank)
	if !strings.Contains(out, fmt.Sprintf("attempt 0: rank %d failed (signal: killed", rank)) {
		t.Fatalf("orwlrun did not restart after rank %d was killed:\n%s", rank, out)
	}
	j.checkResult(status, out)
}

// TestPlainDirectoryResumes: one checkpoint directory for the whole job, without
// "{rank}" (as on a file system that every host mounts): its processes keep their
// checkpoints side by side in it, and after a random process is killed the job resumes from
// them with the checksum of an uninterrupted run.
func TestPlainDirectoryResumes(t *testing.T) {
	j := newCkJob(t)
	j.plain = true
	rank := rand.N(2)
	status, out := j.run(2, 2, j.args(ckN), rank)
	if !strings.Contains(out, fmt.Sprintf("attempt 0: rank %d failed (signal: killed", rank)) {
		t.Fatalf("orwlrun did not restart after rank %d was killed:\n%s", rank, out)
	}
	j.checkResult(status, out)
	if subs, _ := filepath.Glob(filepath.Join(j.dir, "rank-*")); len(subs) != 2 {
		t.Fatalf("directories %q in the job's directory, want one per rank", subs)
	}
}

// TestFinishedJobRunAgainComputes: a job that finished, run again on its directory, starts
// afresh and says why, computing the checksum again, instead of resuming from its last
// checkpoint and printing the old result at once.
func TestFinishedJobRunAgainComputes(t *testing.T) {
	j := newCkJob(t)
	j.plain = true
	j.p.Iters = ckIters / 5 // no kill to come: a second of computation, checkpoints in it
	j.want = fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(j.p)))
	for run := range 2 {
		status, out := j.run(2, 0, j.args(ckN))
		m := regexp.MustCompile(`result: .* checksum=([0-9a-f]+) resumed-at=(\d+)`).FindStringSubmatch(out)
		switch {
		case status != 0 || m == nil || m[1] != j.want:
			t.Fatalf("run %d: status %d, want 0 and the checksum %s:\n%s", run, status, j.want, out)
		case m[2] != "0" || strings.Contains(out, "resumed from checkpoint"):
			t.Fatalf("run %d resumed from a checkpoint:\n%s", run, out)
		case !strings.Contains(out, "checkpoint complete"):
			t.Fatalf("run %d took no checkpoint:\n%s", run, out)
		case run == 1 && !strings.Contains(out, "finished: starting afresh"):
			t.Fatalf("run again, the job did not say that it starts afresh:\n%s", out)
		}
	}
}

// TestNodeLossResumesFromPartnerCopies: a process killed and its directory gone with its
// node: the job, started again, restores that process's pieces from the copies the next
// rank kept, and ends with the checksum of an uninterrupted run.
func TestNodeLossResumesFromPartnerCopies(t *testing.T) {
	j := newCkJob(t)
	rank := rand.N(3)
	if status, out := j.run(3, 0, j.args(ckN), rank); status == 0 {
		t.Fatalf("the job succeeded with rank %d killed:\n%s", rank, out)
	}
	if err := os.RemoveAll(filepath.Join(j.dir, strconv.Itoa(rank))); err != nil {
		t.Fatal(err)
	}
	j.checkResult(j.run(3, 0, j.args(ckN)))
}

// TestWholeJobRestartsOnFewerProcesses: every process killed at once, then the job
// started again on 2 processes instead of 3 ends with the checksum of an uninterrupted
// run. From the directories it leaves, another problem (-n) is refused, naming the
// difference, and a corrupted piece of the newest checkpoint makes the job use the one
// before, saying so.
func TestWholeJobRestartsOnFewerProcesses(t *testing.T) {
	j := newCkJob(t)
	if status, out := j.run(3, 0, j.args(ckN), 0, 1, 2); status == 0 {
		t.Fatalf("the job succeeded with every process killed:\n%s", out)
	}
	j.checkResult(j.run(2, 0, j.args(ckN)))

	t.Run("another problem is refused", func(t *testing.T) {
		status, out := j.run(2, 0, j.args(ckN+1))
		if status == 0 || !strings.Contains(out, "is of another job") || !strings.Contains(out, fmt.Sprintf("%dx1", ckN+1)) {
			t.Fatalf("status %d, want a failure naming -n %d:\n%s", status, ckN+1, out)
		}
	})
	t.Run("a corrupted piece falls back", func(t *testing.T) {
		unfinish(t, j.dir)
		newest := corruptNewest(t, j.dir)
		status, out := j.run(2, 0, j.args(ckN))
		j.checkResult(status, out)
		if !strings.Contains(out, "corrupted") || strings.Contains(out, fmt.Sprintf("resumed from checkpoint: iteration=%d\n", newest)) {
			t.Fatalf("the job did not say it fell back from checkpoint %d:\n%s", newest, out)
		}
	})
}

// unfinish removes the marks of a finished job from the directories under root: their
// checkpoints are then those of a run killed at its end, which a restart resumes from.
func unfinish(t *testing.T, root string) {
	t.Helper()
	marks, _ := filepath.Glob(filepath.Join(root, "*", "FINISHED"))
	if len(marks) == 0 {
		t.Fatalf("no mark of a finished job under %s", root)
	}
	for _, m := range marks {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
}

// corruptNewest flips a byte of task 0's block in every copy of the newest complete
// checkpoint (one with a manifest) in the directories under root, and returns its number.
func corruptNewest(t *testing.T, root string) int {
	t.Helper()
	manifests, _ := filepath.Glob(filepath.Join(root, "*", "ckpt-*", "MANIFEST"))
	newest := 0
	for _, m := range manifests {
		k, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(m)), "ckpt-"))
		newest = max(newest, k)
	}
	copies, _ := filepath.Glob(filepath.Join(root, "*", "ckpt-*", "state.0.block"))
	n := 0
	for _, c := range copies {
		if !strings.HasSuffix(filepath.Dir(c), fmt.Sprintf("ckpt-%d", newest)) {
			continue
		}
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		if err := os.WriteFile(c, b, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no piece of task 0's block in %s: %v", root, copies)
	}
	return newest
}

// TestUnwritableCheckpointDirFailsAtStart: a checkpoint directory that cannot be made
// fails the job at its start, naming it.
func TestUnwritableCheckpointDirFailsAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	status, out := launch(2, "-n 100 -tasks 2 -iters 10 -checkpoint "+filepath.Join(file, "{rank}"))
	// Either process may fail first, and the launcher stops the other before it says why.
	if status != 1 || !strings.Contains(out, filepath.Join(file, "0")) && !strings.Contains(out, filepath.Join(file, "1")) {
		t.Fatalf("status %d, want 1 and an error naming %s or %s:\n%s", status, filepath.Join(file, "0"), filepath.Join(file, "1"), out)
	}
}

// TestRestartScriptUnderMpirun: restart.sh starts mpirun again after a process is killed,
// and the job resumes from its checkpoint with the checksum of an uninterrupted run.
func TestRestartScriptUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun.openmpi") // not "mpirun": MPICH registers one too
	if err != nil {
		t.Skip("mpirun.openmpi not found: install Debian's openmpi-bin to run this test")
	}
	j := newCkJob(t)
	rank := rand.N(3)
	status, out := j.launch([]string{"sh", "restart.sh", mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3",
		"-x", childEnv, "-x", killjob.PidsEnv, "-x", "GORACE", "-x", "ORWL_SECRET", "-x", "ORWL_ATTEMPT"}, j.args(ckN), rank)
	if !strings.Contains(out, "restart.sh: attempt 0 failed") {
		t.Fatalf("restart.sh did not start the job again after rank %d was killed:\n%s", rank, out)
	}
	j.checkResult(status, out)
}

// TestRestartScriptUnderSrun: the same under srun --mpi=pmi2. It needs a running SLURM
// cluster (.ci/slurm.sh starts a one-node one) and skips without.
func TestRestartScriptUnderSrun(t *testing.T) {
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Skip("srun not found: SLURM is not installed here")
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%T").Output(); err != nil || !strings.ContainsAny(string(out), "idlemx") {
		t.Skipf("no SLURM cluster answers here (sinfo: %v %q): .ci/slurm.sh starts a one-node one", err, out)
	}
	j := newCkJob(t)
	rank := rand.N(3)
	status, out := j.launch([]string{"sh", "restart.sh", srun, "--mpi=pmi2", "-n", "3", "-O", "--kill-on-bad-exit=1"}, j.args(ckN), rank)
	if !strings.Contains(out, "restart.sh: attempt 0 failed") {
		t.Fatalf("restart.sh did not start the job again after rank %d was killed:\n%s", rank, out)
	}
	j.checkResult(status, out)
}
