package kubeemu

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExamplesManifests: the manifests of examples/kubernetes pass Check, and their pods get
// the Job's variables.
func TestExamplesManifests(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/kubernetes/*.yaml")
	if len(files) < 2 {
		t.Fatalf("manifests: %v", files)
	}
	for _, f := range files {
		m, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
		if m.Secrets[m.Job.Name] == nil {
			m.AddSecret(m.Job.Name, "secret", "s3")
		}
		env, err := m.PodEnv(2)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"ORWL_SIZE=3", "ORWL_SERVICE=" + m.Service.Name, "ORWL_JOB_NAME=" + m.Job.Name, "JOB_COMPLETION_INDEX=2", "HOSTNAME=" + m.Job.Name + "-2"} {
			if !slices.Contains(env, kv) {
				t.Errorf("%s: pod 2's environment %q has no %s", f, env, kv)
			}
		}
		if h := m.Hosts(); len(h) != 3 || h[1][0] != m.Job.Name+"-1."+m.Service.Name {
			t.Errorf("%s: hosts %v", f, h)
		}
	}
}

// broken is a manifest with one problem of each kind Check finds.
const broken = `apiVersion: v1
kind: Service
metadata:
  name: svc
spec:
  selector:
    batch.kubernetes.io/job-name: other
  ports:
    - port: 80
---
apiVersion: batch/v1
kind: Job
metadata:
  name: job
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      subdomain: sub
      restartPolicy: Always
      containers:
        - name: c
          ports:
            - containerPort: 80
          env:
            - name: ORWL_SIZE
              value: "2"
            - name: ORWL_JOB_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: ORWL_SECRET
              value: plain
          volumeMounts:
            - name: gone
              mountPath: /x
            - name: data
              mountPath: /y
      volumes:
        - name: data
          persistentVolumeClaim:
            claimName: missing
`

// TestCheckNamesEveryProblem: Check reports each problem of a broken manifest, and PodEnv
// refuses what it cannot resolve or replace.
func TestCheckNamesEveryProblem(t *testing.T) {
	f := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(f, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Check()
	if err == nil {
		t.Fatal("Check passed a broken manifest")
	}
	for _, want := range []string{f, "not headless", "selects map[batch.kubernetes.io/job-name:other]", `subdomain "sub"`,
		"Service's ports", `"" with completions 3, parallelism 2`, `restartPolicy "Always"`, "container's ports",
		`volume "gone"`, `claims "missing"`, `ORWL_SIZE is "2", want "3"`, "does not set ORWL_SERVICE",
		"field metadata.name is not emulated", "ORWL_SECRET does not come from a Secret"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's error does not say %q:\n%v", want, err)
		}
	}
	if _, err := m.PodEnv(0); err == nil || !strings.Contains(err.Error(), "ORWL_JOB_NAME") {
		t.Errorf("PodEnv: %v, want an error naming ORWL_JOB_NAME", err)
	}
	if _, err := m.PodEnv(0, "ORWL_JOB_NAME=job", "ORWL_NOPE=1"); err == nil || !strings.Contains(err.Error(), "cannot replace ORWL_NOPE") {
		t.Errorf("PodEnv: %v, want an error naming ORWL_NOPE", err)
	}
	env, err := m.PodEnv(1, "ORWL_JOB_NAME=job")
	if err != nil || !slices.Equal(env, []string{"ORWL_SIZE=2", "ORWL_JOB_NAME=job", "ORWL_SECRET=plain", "JOB_COMPLETION_INDEX=1", "HOSTNAME=job-1"}) {
		t.Errorf("PodEnv: %q, %v", env, err)
	}
}

// TestReadErrors: a file that is not there, YAML that is not, and a file without a Job fail
// naming the file.
func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"bad.yaml": "kind: [", "nojob.yaml": "kind: Service\nmetadata:\n  name: s\n"} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(f); err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
	if _, err := Read(filepath.Join(dir, "none.yaml")); err == nil {
		t.Error("Read of a missing file succeeded")
	}
}
