package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/internal/testemu/killjob"
)

// privateJob is a ckJob whose processes each see only the disk of their node: each runs in
// a mount namespace of its own (unshare --mount) in which the job's checkpoint directory is
// its node's directory, nodes/node-RANK, mounted over it. No process can see a piece
// another one wrote; what it needs from another disk comes over the job's connections.
type privateJob struct {
	*ckJob
	nodes string
}

// newPrivateJob returns a privateJob, or skips the test where mount namespaces cannot be
// made (see skipWithoutMounts).
func newPrivateJob(t *testing.T) *privateJob {
	t.Helper()
	skipWithoutMounts(t)
	return &privateJob{ckJob: newCkJob(t), nodes: t.TempDir()}
}

// skipWithoutMounts skips the test where a process cannot mount in a mount namespace of its
// own (no unshare command, not root).
func skipWithoutMounts(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare command (util-linux): cannot give each process a private checkpoint directory")
	}
	probe := t.TempDir()
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		"mount --bind "+quote(probe)+" "+quote(probe)).CombinedOutput(); err != nil {
		t.Skipf("cannot mount in a mount namespace of its own (root is needed): %v %s", err, out)
	}
}

// privateMount returns the command that runs the command following it in a mount namespace
// of its own, in which the directory node (a shell word: it may name variables), made if
// missing, is mounted over dir.
func privateMount(node, dir string) []string {
	script := "mkdir -p " + node + " && mount --bind " + node + " " + quote(dir) + ` && exec "$@"`
	return []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}
}

// quote quotes s for sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// run runs the job on procs processes, without restarts, the processes of attempt 0 of
// the ranks in kill killed after a checkpoint (see ckJob.launch).
func (j *privateJob) run(procs int, kill ...int) (int, string) {
	j.t.Helper()
	bin, _ := killjob.Orwlrun()
	argv := append([]string{bin, "-np", strconv.Itoa(procs), "-restarts", "0", "-grace", "1s"},
		privateMount(quote(j.nodes)+"/node-$ORWL_RANK", j.dir)...)
	return j.launch(argv, j.args(ckN), kill...)
}

// loseNode removes the disk of rank's node.
func (j *privateJob) loseNode(rank int) {
	j.t.Helper()
	if err := os.RemoveAll(filepath.Join(j.nodes, fmt.Sprintf("node-%d", rank))); err != nil {
		j.t.Fatal(err)
	}
}

// TestPrivateDiskLostResumes: with a disk per node, a process killed after a checkpoint
// and its node's disk lost, the job started again on 3 processes gets that process's pieces
// from the copies the next rank kept on its own disk, sent over the job's connections, and
// ends with the checksum of an uninterrupted run.
func TestPrivateDiskLostResumes(t *testing.T) {
	j := newPrivateJob(t)
	rank := rand.N(3)
	if status, out := j.run(3, rank); status == 0 {
		t.Fatalf("the job succeeded with rank %d killed:\n%s", rank, out)
	}
	j.loseNode(rank)
	if _, err := os.Stat(filepath.Join(j.dir, strconv.Itoa(rank))); err == nil {
		t.Fatalf("rank %d's directory is in %s, which every process sees: the disks are not private", rank, j.dir)
	}
	j.checkResult(j.run(3))
}

// TestPrivateDisksRestartOnFewerProcesses: with a disk per node, every process killed after
// a checkpoint and the job started again on 2 nodes out of 3: the pieces of the vanished
// rank, whose only surviving copies are on rank 0's disk, are sent to the process that now
// runs their tasks, and the job ends with the checksum of an uninterrupted run. A
// corrupted piece of the newest checkpoint then makes the job use the one before, saying
// so.
func TestPrivateDisksRestartOnFewerProcesses(t *testing.T) {
	j := newPrivateJob(t)
	if status, out := j.run(3, 0, 1, 2); status == 0 {
		t.Fatalf("the job succeeded with every process killed:\n%s", out)
	}
	j.loseNode(2)
	j.checkResult(j.run(2))

	unfinish(t, filepath.Join(j.nodes, "node-*"))
	newest := corruptNewest(t, filepath.Join(j.nodes, "node-*"))
	status, out := j.run(2)
	j.checkResult(status, out)
	if !strings.Contains(out, "corrupted") || strings.Contains(out, fmt.Sprintf("resumed from checkpoint: iteration=%d\n", newest)) {
		t.Fatalf("the job did not say it fell back from checkpoint %d:\n%s", newest, out)
	}
}
