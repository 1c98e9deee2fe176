package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/internal/jobenv"
	"github.com/orwl-go/orwl/internal/netemu"
	"github.com/orwl-go/orwl/orwl"
)

// manifest is what TestKubernetesManifest reads from examples/kubernetes/matmul.yaml.
type manifest struct {
	service, serviceSelector, servicePort string
	secretName, secretValue               string
	job, subdomain                        string
	completions, parallelism              int
	containerPort                         string
	env                                   []envVar
}

// envVar is one entry of the container's env: a value, or where Kubernetes takes it from.
type envVar struct{ name, value, fieldPath, secretName, secretKey string }

// readManifest extracts the settings the test needs from the manifest's three objects. It
// reads the layout of that one file, not YAML in general.
func readManifest(t *testing.T, file string) manifest {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	field := func(doc, re string) string {
		s := regexp.MustCompile(`(?m)` + re).FindStringSubmatch(doc)
		if s == nil {
			t.Fatalf("%s: no match for %s in\n%s", file, re, doc)
		}
		return s[1]
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		switch field(doc, `^kind: (\S+)`) {
		case "Service":
			m.service = field(doc, `^metadata:\n  name: (\S+)`)
			m.serviceSelector = field(doc, `^  selector:\n    (\S+: \S+)`)
			m.servicePort = field(doc, `^\s+port: (\d+)`)
		case "Secret":
			m.secretName = field(doc, `^metadata:\n  name: (\S+)`)
			m.secretValue = field(doc, `^stringData:\n  secret: (\S+)`)
		case "Job":
			m.job = field(doc, `^metadata:\n  name: (\S+)`)
			m.subdomain = field(doc, `^\s+subdomain: (\S+)`)
			m.completions, _ = strconv.Atoi(field(doc, `^  completions: (\d+)`))
			m.parallelism, _ = strconv.Atoi(field(doc, `^  parallelism: (\d+)`))
			m.containerPort = field(doc, `^\s+- containerPort: (\d+)`)
			env := field(doc, `(?s)\n\s+env:\n(.*?)\n\s+resources:`)
			for _, line := range strings.Split(env, "\n") {
				line, _, _ = strings.Cut(line, "#")
				k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
				v = strings.Trim(v, `"`)
				switch k {
				case "- name":
					m.env = append(m.env, envVar{name: v})
				case "value":
					m.env[len(m.env)-1].value = v
				case "fieldPath":
					m.env[len(m.env)-1].fieldPath = v
				case "name":
					m.env[len(m.env)-1].secretName = v
				case "key":
					m.env[len(m.env)-1].secretKey = v
				}
			}
		}
	}
	return m
}

// TestKubernetesManifest runs the settings of examples/kubernetes/matmul.yaml on emulated
// pods: one network namespace per pod, whose hosts file names every pod
// <job>-<index>.<service> as the cluster's DNS would, and each pod's process gets the
// manifest's variables as Kubernetes would set them (the downward API's job name, the
// Secret's value, JOB_COMPLETION_INDEX). The job must give the one-process checksum, and
// every process, alone on its pod, must use all the cores for its kernel.
func TestKubernetesManifest(t *testing.T) {
	m := readManifest(t, "../kubernetes/matmul.yaml")
	port := strconv.Itoa(jobenv.KubernetesPort)
	switch {
	case m.subdomain != m.service:
		t.Fatalf("the pods' subdomain %q is not the Service %q", m.subdomain, m.service)
	case m.serviceSelector != "batch.kubernetes.io/job-name: "+m.job:
		t.Fatalf("the Service selects %q, not the Job's pods", m.serviceSelector)
	case m.servicePort != port || m.containerPort != port:
		t.Fatalf("ports %s and %s, the coordinator's is %s", m.servicePort, m.containerPort, port)
	case m.completions != m.parallelism:
		t.Fatalf("completions %d, parallelism %d: every pod must run at once", m.completions, m.parallelism)
	}
	pods := m.completions
	var env []string
	for _, e := range m.env {
		v := e.value
		switch {
		case e.fieldPath == "metadata.labels['batch.kubernetes.io/job-name']":
			v = m.job
		case e.fieldPath != "":
			t.Fatalf("%s: field %s is not emulated", e.name, e.fieldPath)
		case e.secretName != "":
			if e.secretName != m.secretName || e.secretKey != "secret" {
				t.Fatalf("%s: the Secret %s, key %s, is not in the manifest", e.name, e.secretName, e.secretKey)
			}
			v = m.secretValue
		}
		env = append(env, e.name+"="+v)
	}
	if got := strings.Join(env, " "); !strings.Contains(got, "ORWL_SIZE="+strconv.Itoa(pods)+" ") ||
		!strings.Contains(got, "ORWL_SERVICE="+m.service+" ") || !strings.Contains(got, "ORWL_SECRET=") || !strings.Contains(got, "ORWL_JOB_NAME="+m.job) {
		t.Fatalf("the manifest's variables do not describe the job: %s", got)
	}

	var names [][]string
	for k := range pods {
		names = append(names, []string{fmt.Sprintf("%s-%d.%s", m.job, k, m.service)})
	}
	net := netemu.ForTest(t, names...)

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
		cmd := net.Command(ctx, k, os.Args[0], "-test.run=^$")
		cmd.Env = netemu.CleanEnv(env...)
		cmd.Env = append(cmd.Env, "JOB_COMPLETION_INDEX="+strconv.Itoa(k), fmt.Sprintf("HOSTNAME=%s-%d", m.job, k), childEnv+"="+args)
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

// TestThreadsPerHost: the default kernel threads divide this host's cores among the tasks
// on this host, not among the whole job's.
func TestThreadsPerHost(t *testing.T) {
	for _, tc := range []struct {
		tasks, procs, local int
		inJob               bool
		want                int
	}{
		{tasks: 3, procs: 3, local: 3, inJob: false, want: 3}, // this program starts them all here
		{tasks: 3, procs: 3, local: 1, inJob: true, want: 1},  // one process per node
		{tasks: 6, procs: 3, local: 1, inJob: true, want: 2},  // two tasks per process, one process here
		{tasks: 4, procs: 4, local: 2, inJob: true, want: 2},  // two processes on this node
		{tasks: 5, procs: 2, local: 1, inJob: true, want: 3},  // uneven share: the larger
		{tasks: 4, procs: 4, local: 0, inJob: true, want: 4},  // the launcher does not say: all here
	} {
		c := &config{tasks: tc.tasks, Where: cli.Where{Procs: tc.procs, InJob: tc.inJob}}
		if got := tasksOnHost(c, orwl.Job{LocalSize: tc.local}); got != tc.want {
			t.Errorf("%d tasks, %d processes, %d here, in a job %v: %d tasks on this host, want %d", tc.tasks, tc.procs, tc.local, tc.inJob, got, tc.want)
		}
	}
	// In a pod of a Kubernetes Indexed Job of three (one process per pod), the process uses
	// every core.
	for _, kv := range []string{"JOB_COMPLETION_INDEX=1", "ORWL_SIZE=3", "ORWL_SERVICE=svc", "ORWL_JOB_NAME=mm", "ORWL_SECRET=s"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, err := parse([]string{"-n", "64", "-kernel", "gonum"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.InJob || c.Procs != 3 || c.threads != runtime.NumCPU() {
		t.Fatalf("in a pod: in a job %v, %d processes, %d threads; want 3 processes and %d threads", c.InJob, c.Procs, c.threads, runtime.NumCPU())
	}
}
