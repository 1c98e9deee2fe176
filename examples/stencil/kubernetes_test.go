package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
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
	"github.com/orwl-go/orwl/internal/testemu/kubeemu"
	"github.com/orwl-go/orwl/internal/testemu/netemu"
)

// kubeIters is the iterations of the job of TestKubernetesRestart: fewer than ckIters (the
// first checkpoint comes after a few dozen, and a restarted job runs the rest), enough for
// the kill to come well before the end.
const kubeIters = 1000

// peerTimeout is ORWL_PEER_TIMEOUT's default, which examples/kubernetes/stencil.yaml keeps:
// the most time a pod takes to fail after another one is lost, on an idle machine.
const peerTimeout = 3 * time.Second

// kubeJob is the Job of examples/kubernetes/stencil.yaml on emulated pods (kubeemu, netemu),
// with this test as its Job controller. Every pod runs on a node whose disk is the
// directory nodes/NODE, which a private mount (privateMount) puts in place of the volume's
// mountPath for its process alone: the pods see node-local disks (hostPath), the case where
// restarts depend on the pieces the processes send each other.
type kubeJob struct {
	t     *testing.T
	ctx   context.Context
	m     *kubeemu.Manifest
	net   *netemu.Net
	args  string     // the stencil's arguments: the manifest's, with a small problem
	tasks string     // their -tasks
	env   [][]string // each pod's environment
	root  string     // the volume's mountPath, over which each pod's node's disk is mounted
	nodes string     // the nodes' disks
	node  []string   // the node each index's next pod runs on
	exits chan podExit
}

// podExit is how a pod ended.
type podExit struct {
	k   int       // its index
	cmd *exec.Cmd // its process
	err error     // cmd.Wait's
	out string    // its output
	at  time.Time // when it ended
}

// newKubeJob reads the manifest and makes its pods' hosts and environments; it skips the
// test where hosts or mounts cannot be emulated.
func newKubeJob(t *testing.T, ctx context.Context) *kubeJob {
	t.Helper()
	skipWithoutMounts(t)
	m, err := kubeemu.Read("../kubernetes/stencil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m.AddSecret(m.Job.Name, "secret", fmt.Sprintf("%016x", rand.Uint64())) // as the manifest's kubectl line makes it
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if pod := m.Job.Template.Spec; pod.RestartPolicy != "Never" || m.Job.BackoffLimit < 2*m.Pods() {
		t.Fatalf("restartPolicy %s, backoffLimit %d: the test plays the Job controller of restartPolicy Never, for a restart of %d pods at least", pod.RestartPolicy, m.Job.BackoffLimit, m.Pods())
	}
	j := &kubeJob{t: t, ctx: ctx, m: m, root: t.TempDir(), nodes: t.TempDir(), exits: make(chan podExit, m.Pods()+m.Job.BackoffLimit+1)}
	j.args, j.tasks = j.stencilArgs()
	mounts := m.Container().VolumeMounts
	ckDir, err := m.Value("ORWL_CHECKPOINT_DIR")
	if err != nil || len(mounts) != 1 || !strings.HasPrefix(ckDir, mounts[0].MountPath+"/") || !strings.Contains(ckDir, "{rank}") {
		t.Fatalf("ORWL_CHECKPOINT_DIR=%s (%v): want a directory per rank ({rank}) in the one volume mounted, %v", ckDir, err, mounts)
	}
	ckDir = j.root + strings.TrimPrefix(ckDir, mounts[0].MountPath)
	j.net = netemu.ForTest(t, m.Hosts()...)
	for k := range m.Pods() {
		env, err := m.PodEnv(k, "ORWL_CHECKPOINT_DIR="+ckDir, "ORWL_CHECKPOINT_EVERY="+ckEvery)
		if err != nil {
			t.Fatal(err)
		}
		j.env = append(j.env, env)
		j.node = append(j.node, "node-"+strconv.Itoa(k))
	}
	return j
}

// stencilArgs returns the arguments of the manifest's command with the checkpoint tests'
// problem (ckN cells, kubeIters iterations) in place of its own, and its -tasks.
func (j *kubeJob) stencilArgs() (string, string) {
	args := j.m.Container().Command[1:]
	set := map[string]string{"-n": strconv.Itoa(ckN), "-iters": strconv.Itoa(kubeIters), "-tasks": ""}
	var out []string
	tasks := ""
	for i := 0; i < len(args); i++ {
		v, ok := set[args[i]]
		if ok && i+1 < len(args) {
			if v == "" {
				v, tasks = args[i+1], args[i+1]
			}
			out = append(out, args[i], v)
			delete(set, args[i])
			i++
			continue
		}
		out = append(out, args[i])
	}
	if len(set) > 0 {
		j.t.Fatalf("the manifest's command %q has no %v", j.m.Container().Command, set)
	}
	return strings.Join(out, " "), tasks
}

// start starts a pod of index k on its node; lines sees each line of its output.
func (j *kubeJob) start(k int, lines func(string)) *exec.Cmd {
	j.t.Helper()
	argv := append(privateMount(quote(filepath.Join(j.nodes, j.node[k])), j.root), os.Args[0], "-test.run=^$")
	cmd := j.net.Command(j.ctx, k, argv...)
	cmd.Env = netemu.CleanEnv(append(j.env[k], childEnv+"="+j.args, "GORACE=atexit_sleep_ms=0")...)
	pipe := startPiped(j.t, cmd)
	go func() {
		var out strings.Builder
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			lines(sc.Text())
		}
		io.Copy(&out, pipe)
		err := cmd.Wait()
		j.exits <- podExit{k, cmd, err, out.String(), time.Now()}
	}()
	return cmd
}

// TestKubernetesRestart runs examples/kubernetes/stencil.yaml on emulated pods with
// node-local disks, loses one pod after a checkpoint is complete, and plays the Job
// controller of restartPolicy: Never, which replaces every failed pod by a new one of the
// same index as soon as it fails, within backoffLimit failures. The other pods must fail
// within the peer timeout, naming the lost rank; the new pods form the job again, resume
// from the checkpoint and end with the checksum of an uninterrupted run. Either the lost
// pod's process is killed and its replacement runs on the same node, whose disk is kept;
// or its node is lost: it falls silent (cut off from every other pod, then killed) and
// the replacement runs on a new node whose disk is empty.
func TestKubernetesRestart(t *testing.T) {
	for _, nodeLost := range []bool{false, true} {
		t.Run(map[bool]string{false: "pod killed", true: "node lost"}[nodeLost], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			j := newKubeJob(t, ctx)
			j.restart(rand.N(j.m.Pods()), nodeLost)
		})
	}
}

// backoffUnit is the Job controller's first back-off before it replaces a failed pod,
// scaled down: Kubernetes waits 10s, then twice as long after each failure (capped at 6
// minutes); the emulation waits a thousandth of that.
const backoffUnit = 10 * time.Millisecond

// controller is the state of the Job controller that kubeJob.restart plays.
type controller struct {
	first         []*exec.Cmd // the first pod of each index
	failures      int         // pods failed
	firstFailures int         // first pods failed
	held          bool        // the lost node's pod's replacement waits for the other first pods to fail
	starts        chan int    // the indexes whose replacement is due
	done          map[int]string
	logs          []string
}

// restart runs the job, losing victim's first pod (and its node, with nodeLost) after a
// checkpoint, and checks its failure and its restart (see TestKubernetesRestart).
func (j *kubeJob) restart(victim int, nodeLost bool) {
	j.t.Helper()
	checkpointed, seen := make(chan struct{}), false
	c := &controller{first: make([]*exec.Cmd, j.m.Pods()), starts: make(chan int, j.m.Pods()), done: map[int]string{}}
	for k := range c.first {
		c.first[k] = j.start(k, func(l string) {
			if k == 0 && !seen && strings.Contains(l, "checkpoint complete") {
				seen = true
				close(checkpointed)
			}
		})
	}
	var killAt <-chan time.Time
	var killed time.Time
	for len(c.done) < j.m.Pods() {
		select {
		case <-checkpointed:
			checkpointed, killAt = nil, time.After(rand.N(50*time.Millisecond))
		case <-killAt:
			j.lose(c.first[victim], victim, nodeLost)
			killAt, killed = nil, time.Now()
		case k := <-c.starts:
			j.start(k, func(string) {})
		case e := <-j.exits:
			c.logs = append(c.logs, fmt.Sprintf("--- pod %d (%v):\n%s", e.k, e.err, e.out))
			if e.err == nil {
				c.done[e.k] = e.out
				continue
			}
			if e.cmd == c.first[e.k] {
				c.firstFailures++
				j.checkFirstFailure(e, victim, killed, c.logs)
			}
			j.replace(c, e.k, nodeLost && e.cmd == c.first[victim])
			if c.held && c.firstFailures == len(c.first) {
				c.held = false
				j.replaceNode(victim)
				c.starts <- victim
			}
		case <-j.ctx.Done():
			j.t.Fatalf("the Job did not end in time (%d pods succeeded)\n%s", len(c.done), strings.Join(c.logs, ""))
		}
	}
	if c.firstFailures != len(c.first) {
		j.t.Fatalf("%d pods of %d failed after pod %d was lost (at %v)\n%s", c.firstFailures, len(c.first), victim, killed, strings.Join(c.logs, ""))
	}
	j.t.Logf("pod %d lost, node lost %v: %d pod failures, then every pod succeeded", victim, nodeLost, c.failures)
	tasks, err := strconv.Atoi(j.tasks)
	if err != nil {
		j.t.Fatalf("the manifest's -tasks %q: %v", j.tasks, err)
	}
	p, err := params(strconv.Itoa(ckN), grid.Grid{}, tasks, kubeIters)
	if err != nil {
		j.t.Fatal(err)
	}
	ck := &ckJob{t: j.t, want: fmt.Sprintf("%016x", jacobi.Checksum(jacobi.Sequential(p)))}
	ck.checkResult(0, c.done[0])
	if left, _ := os.ReadDir(j.root); len(left) > 0 {
		j.t.Fatalf("%s, the volume's place, holds %v: a pod wrote around its node's disk", j.root, left)
	}
}

// replace counts the failure of a pod of index k and has it replaced after the back-off,
// or fails the test past the Job's backoffLimit. The pod of a lost node is held: Kubernetes
// replaces it only once the node is found gone (5 minutes by default), long after the
// others fail.
func (j *kubeJob) replace(c *controller, k int, lostNode bool) {
	j.t.Helper()
	if c.failures++; c.failures > j.m.Job.BackoffLimit {
		j.t.Fatalf("the Job failed: %d pod failures, backoffLimit %d\n%s", c.failures, j.m.Job.BackoffLimit, strings.Join(c.logs, ""))
	}
	if lostNode {
		c.held = true
		return
	}
	time.AfterFunc(backoffUnit<<(c.failures-1), func() { c.starts <- k })
}

// lose kills pod, of index k; with nodeLost, it first cuts it off from every other pod,
// as a node that vanishes does.
func (j *kubeJob) lose(pod *exec.Cmd, k int, nodeLost bool) {
	j.t.Helper()
	for i := range j.m.Pods() {
		if nodeLost && i != k {
			if err := j.net.Partition(k, i); err != nil {
				j.t.Fatal(err)
			}
		}
	}
	if err := syscall.Kill(pod.Process.Pid, syscall.SIGKILL); err != nil {
		j.t.Fatalf("killing pod %d: %v", k, err)
	}
}

// replaceNode gives index k a new node, whose disk is empty, and the pods there the
// network again (on Kubernetes, a new pod on another node has an address of its own).
func (j *kubeJob) replaceNode(k int) {
	j.t.Helper()
	j.node[k] = fmt.Sprintf("node-%d-new", k)
	for i := range j.m.Pods() {
		if i != k {
			if err := j.net.Heal(k, i); err != nil {
				j.t.Fatal(err)
			}
		}
	}
}

// checkFirstFailure checks the failure e of a first pod: the victim killed after a
// checkpoint, every other failed within the peer timeout of the kill, naming the victim's
// rank.
func (j *kubeJob) checkFirstFailure(e podExit, victim int, killed time.Time, logs []string) {
	j.t.Helper()
	switch {
	case killed.IsZero():
		j.t.Fatalf("pod %d failed before any was killed\n%s", e.k, strings.Join(logs, ""))
	case e.k == victim:
		if !strings.Contains(e.err.Error(), "signal: killed") {
			j.t.Fatalf("pod %d, the one killed, ended with %v\n%s", e.k, e.err, strings.Join(logs, ""))
		}
	case !strings.Contains(e.out, fmt.Sprintf("process rank %d lost", victim)):
		j.t.Fatalf("pod %d failed without naming rank %d, the one killed\n%s", e.k, victim, strings.Join(logs, ""))
	case e.at.Sub(killed) > peerTimeout+5*time.Second:
		j.t.Fatalf("pod %d failed %v after pod %d was killed, the peer timeout is %v\n%s", e.k, e.at.Sub(killed), victim, peerTimeout, strings.Join(logs, ""))
	}
}
