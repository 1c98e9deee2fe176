package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/grid"
	"github.com/orwl-go/orwl/examples/stencil/jacobi"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
	"github.com/orwl-go/orwl/internal/testemu/netemu"
)

// hostIters is the iterations of the jobs on emulated hosts: as kubeIters, enough for a
// checkpoint to be complete well before the end, few enough for a test of seconds.
const hostIters = kubeIters

// hostJob is a privateJob on emulated hosts (netemu): rank r runs on host r, in the host's
// network namespace, with the host's disk (nodes/node-r) as its checkpoint directory. The
// processes of different hosts share neither memory nor disk: what one needs from another
// host comes over the emulated network.
type hostJob struct {
	*privateJob
	net *netemu.Net
}

// newHostJob returns a hostJob of three hosts, or skips the test where namespaces or
// mounts cannot be made.
func newHostJob(t *testing.T) *hostJob {
	t.Helper()
	skipWithoutMounts(t)
	p, err := params(strconv.Itoa(ckN), grid.Grid{}, 3, hostIters)
	if err != nil {
		t.Fatal(err)
	}
	ck := &ckJob{t: t, dir: t.TempDir(), pids: t.TempDir(), p: p, want: fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p)))}
	j := &hostJob{privateJob: &privateJob{ckJob: ck, nodes: t.TempDir()}}
	j.net = netemu.ForTest(t, []string{"host0"}, []string{"host1"}, []string{"host2"})
	return j
}

// hostProc is a process of a hostJob.
type hostProc struct {
	rank int
	cmd  *exec.Cmd
	out  strings.Builder // its output, complete once done is closed
	err  error           // cmd.Wait's, once done is closed
	at   time.Time       // when it ended
	done chan struct{}
}

// start starts attempt (0, 1, ...) of the job as procs processes on hosts 0 to procs-1,
// with the job environment the library reads, set by hand: each attempt has a secret of
// its own, so that no process of an earlier attempt can join it, and its coordinator (rank
// 0, on host 0) a port of its own. seen is called with each line a process prints.
func (j *hostJob) start(ctx context.Context, attempt, procs int, seen func(rank int, line string)) []*hostProc {
	j.t.Helper()
	coord := net.JoinHostPort(j.net.Hosts[0].Addr, strconv.Itoa(7411+attempt))
	secret := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
	ps := make([]*hostProc, procs)
	for r := range ps {
		p := &hostProc{rank: r, done: make(chan struct{})}
		argv := append(privateMount(quote(filepath.Join(j.nodes, fmt.Sprintf("node-%d", r))), j.dir), os.Args[0], "-test.run=^$")
		p.cmd = j.net.Command(ctx, r, argv...)
		p.cmd.Env = netemu.CleanEnv(childEnv+"="+j.args(ckN), "GORACE=atexit_sleep_ms=0",
			"ORWL_RANK="+strconv.Itoa(r), "ORWL_SIZE="+strconv.Itoa(procs), "ORWL_COORD="+coord,
			"ORWL_SECRET="+secret, "ORWL_LISTEN="+j.net.Hosts[r].Addr, "ORWL_ATTEMPT="+strconv.Itoa(attempt))
		pipe := startPiped(j.t, p.cmd)
		go func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				p.out.WriteString(sc.Text() + "\n")
				seen(r, sc.Text())
			}
			io.Copy(&p.out, pipe)
			p.err = p.cmd.Wait()
			p.at = time.Now()
			close(p.done)
		}()
		ps[r] = p
	}
	return ps
}

// wait waits for the processes ps and returns their outputs, one after the other; it fails
// the test if they do not all end before ctx does.
func (j *hostJob) wait(ctx context.Context, ps []*hostProc) string {
	j.t.Helper()
	var outs strings.Builder
	for _, p := range ps {
		<-p.done // ctx kills the process (exec.CommandContext), so it ends
		fmt.Fprintf(&outs, "--- rank %d (%v):\n%s", p.rank, p.err, p.out.String())
	}
	if ctx.Err() != nil {
		j.t.Fatalf("the job did not end in time:\n%s", outs.String())
	}
	return outs.String()
}

// loseHost loses host k at once: it falls silent (cut off from every other host, as a
// host that crashes sends nothing more), its process is killed and its disk is gone.
func (j *hostJob) loseHost(k int, p *hostProc) {
	j.t.Helper()
	for i := range j.net.Hosts {
		if i != k {
			if err := j.net.Partition(k, i); err != nil {
				j.t.Fatal(err)
			}
		}
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		j.t.Fatalf("killing the process of host %d: %v", k, err)
	}
	j.loseNode(k)
}

// checkDisks checks that no process wrote in the checkpoint directory's place, around the
// disk of its host.
func (j *hostJob) checkDisks() {
	j.t.Helper()
	if left, _ := os.ReadDir(j.dir); len(left) > 0 {
		j.t.Fatalf("%s, the checkpoint directory's place, holds %v: a process wrote around its host's disk", j.dir, left)
	}
}

// TestHostLostResumesOnTheOthers: a job of 3 processes on 3 emulated hosts, each with its
// own network namespace and its own disk, loses host 2 at a random moment after a
// checkpoint is complete (cut off, its process killed, its disk gone). The other two
// processes fail within the peer timeout, one at least naming rank 2; the job started
// again by hand on the 2 hosts left, as a new attempt, gets host 2's pieces from the
// partner copies on their disks, sent over the emulated network, resumes from the
// checkpoint and ends with the checksum of an uninterrupted run.
func TestHostLostResumesOnTheOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := newHostJob(t)
	const lost = 2
	checkpointed := make(chan struct{}, 1)
	started := time.Now()
	ps := j.start(ctx, 0, 3, func(_ int, line string) {
		if strings.Contains(line, "checkpoint complete") {
			select {
			case checkpointed <- struct{}{}:
			default:
			}
		}
	})
	ckpt, killAt := (<-chan struct{})(checkpointed), (<-chan time.Time)(nil)
	var killed time.Time
wait:
	for killed.IsZero() {
		select {
		case <-ckpt:
			ckpt, killAt = nil, time.After(rand.N(50*time.Millisecond)) // a random moment after
		case <-killAt:
			j.loseHost(lost, ps[lost])
			killed = time.Now()
		case <-ps[0].done:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	out := j.wait(ctx, ps)
	if killed.IsZero() {
		t.Fatalf("no checkpoint was complete before the job ended:\n%s", out)
	}
	for _, p := range ps[:lost] {
		switch {
		case p.err == nil:
			t.Fatalf("rank %d succeeded with host %d lost:\n%s", p.rank, lost, out)
		case p.at.Sub(killed) > peerTimeout+5*time.Second:
			t.Fatalf("rank %d failed %v after host %d was lost, the peer timeout is %v:\n%s", p.rank, p.at.Sub(killed), lost, peerTimeout, out)
		case !strings.Contains(p.out.String(), fmt.Sprintf("process rank %d lost", lost)):
			t.Fatalf("rank %d does not name rank %d, the one lost:\n%s", p.rank, lost, out)
		}
	}
	t.Logf("host %d lost %v after the start; attempt 0 ended %v after the loss", lost, killed.Sub(started), time.Since(killed))
	restarted := time.Now()
	ps = j.start(ctx, 1, 2, func(int, string) {})
	out = j.wait(ctx, ps)
	t.Logf("attempt 1 took %v", time.Since(restarted))
	status := 0
	if ps[0].err != nil || ps[1].err != nil {
		status = 1
	}
	j.checkResult(status, out)
	if _, err := os.Stat(filepath.Join(j.nodes, fmt.Sprintf("node-%d", lost))); err == nil {
		t.Fatalf("host %d's disk is back: a process of the restart ran there", lost)
	}
	j.checkDisks()
}

// onHosts returns the command that runs the command following it on the emulated host of
// its rank (ORWL_RANK), listening on that host's address: under it, orwlrun, which starts
// processes on its own host, starts each rank on a host of its own.
func (j *hostJob) onHosts() []string {
	script := "case $ORWL_RANK in"
	for i, h := range j.net.Hosts {
		script += fmt.Sprintf(" %d) ns=%s addr=%s;;", i, h.NS, h.Addr)
	}
	script += ` *) echo "no host for rank $ORWL_RANK" >&2; exit 1;; esac; export ORWL_LISTEN=$addr; exec ip netns exec "$ns" "$@"`
	return []string{"sh", "-c", script, "sh"}
}

// TestHostLostResumesUnderOrwlrun is TestHostLostResumesOnTheOthers with the job launched
// by orwlrun: run on host 0, with its coordinator there (-host), it starts each rank on
// the host of the rank (onHosts) with the host's disk; each process listens on its host's
// address, which no other host has, so each runs on its host or the job fails. Rank 2's
// process is killed after a checkpoint and its host's disk is lost; orwlrun -np 2, started
// again, runs the job on hosts 0 and 1, which resumes from the partner copies and ends
// with the checksum of an uninterrupted run.
func TestHostLostResumesUnderOrwlrun(t *testing.T) {
	bin, err := killjob.Orwlrun()
	if err != nil {
		t.Skip(err)
	}
	j := newHostJob(t)
	run := func(procs int, kill ...int) (int, string) {
		argv := append([]string{"ip", "netns", "exec", j.net.Hosts[0].NS, bin, "-np", strconv.Itoa(procs),
			"-restarts", "0", "-grace", "1s", "-host", j.net.Hosts[0].Addr}, j.onHosts()...)
		return j.launch(append(argv, privateMount(quote(j.nodes)+"/node-$ORWL_RANK", j.dir)...), j.args(ckN), kill...)
	}
	if status, out := run(3, 2); status == 0 {
		t.Fatalf("the job succeeded with rank 2 killed:\n%s", out)
	}
	j.loseNode(2)
	j.checkResult(run(2))
	j.checkDisks()
}
