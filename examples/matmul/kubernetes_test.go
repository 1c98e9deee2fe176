package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/internal/testemu/kubeemu"
	"github.com/orwl-go/orwl/internal/testemu/netemu"
)

// TestKubernetesManifest runs the settings of examples/kubernetes/matmul.yaml on emulated
// pods: one network namespace per pod, whose hosts file names every pod
// <job>-<index>.<service> as the cluster's DNS would, and each pod's process gets the
// manifest's variables as Kubernetes would set them (the downward API's job name, the
// Secret's value, JOB_COMPLETION_INDEX). The job must give the one-process checksum, and
// every process, alone on its pod, must use all the cores for its kernel.
func TestKubernetesManifest(t *testing.T) {
	m, err := kubeemu.Read("../kubernetes/matmul.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	pods := m.Pods()
	net := netemu.ForTest(t, m.Hosts()...)

	args := "-n 96 -nb 16 -kernel gonum -verify -json"
	var one bytes.Buffer
	if status := run(append(strings.Fields(args), "-tasks", strconv.Itoa(pods), "-np", "1"), &one, &one); status != 0 {
		t.Fatalf("one process: status %d\n%s", status, one.String())
	}
	var want jsonResult
	if err := json.Unmarshal(one.Bytes(), &want); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout := make([]bytes.Buffer, pods)
	stderr := make([]bytes.Buffer, pods)
	cmds := make([]*exec.Cmd, pods)
	for k := range pods {
		env, err := m.PodEnv(k)
		if err != nil {
			t.Fatal(err)
		}
		cmd := net.Command(ctx, k, os.Args[0], "-test.run=^$")
		cmd.Env = netemu.CleanEnv(append(env, childEnv+"="+args)...)
		cmd.Stdout, cmd.Stderr = &stdout[k], &stderr[k]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[k] = cmd
	}
	for k, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("pod %d: %v\n%s%s", k, err, stdout[k].String(), stderr[k].String())
		}
	}
	var got jsonResult
	if err := json.Unmarshal(stdout[0].Bytes(), &got); err != nil {
		t.Fatalf("pod 0: %v: %q\n%s", err, stdout[0].String(), stderr[0].String())
	}
	if !got.Verified || got.Procs != pods || got.Tasks != pods || got.Checksum != want.Checksum {
		t.Fatalf("pods: %+v\none process: %+v", got, want)
	}
	if got.Threads != runtime.NumCPU() {
		t.Errorf("a process alone on its pod uses %d kernel threads, want all %d cores", got.Threads, runtime.NumCPU())
	}
}

// TestThreadsPerHost: in a pod of a Kubernetes Indexed Job of three (one process per pod),
// the process uses every core (cli.Job.TasksOnHost has the other cases).
func TestThreadsPerHost(t *testing.T) {
	for _, kv := range []string{"JOB_COMPLETION_INDEX=1", "ORWL_SIZE=3", "ORWL_SERVICE=svc", "ORWL_JOB_NAME=mm", "ORWL_SECRET=s"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, err := parse([]string{"-n", "64", "-kernel", "gonum"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.InJob || c.Procs != 3 || c.Threads != runtime.NumCPU() {
		t.Fatalf("in a pod: in a job %v, %d processes, %d threads; want 3 processes and %d threads", c.InJob, c.Procs, c.Threads, runtime.NumCPU())
	}
}
