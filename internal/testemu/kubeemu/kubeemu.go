// Package kubeemu reads the Kubernetes manifests of examples/kubernetes and gives tests what
// Kubernetes would give the pods of their Indexed Job: the names the cluster's DNS gives the
// pods (for netemu's hosts), and each pod's environment (the container's variables resolved
// as the kubelet resolves them, JOB_COMPLETION_INDEX, HOSTNAME). With netemu, a test runs the
// pods as processes in network namespaces of their own.
//
// It reads the objects those manifests use (a headless Service, Secrets, PersistentVolumeClaims
// and an Indexed Job of one container) and the fields of them that matter to an ORWL job;
// anything else in a manifest is ignored.
package kubeemu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orwl-go/orwl/internal/jobenv"
)

// JobNameLabel is the label the Job controller puts on its pods, naming the Job.
const JobNameLabel = "batch.kubernetes.io/job-name"

// Manifest is what Read found in a manifest.
type Manifest struct {
	File    string                       // where it was read from
	Service Service                      // the headless Service
	Secrets map[string]map[string]string // each Secret's stringData, by name
	Claims  map[string][]string          // each PersistentVolumeClaim's access modes, by name
	Job     Job                          // the Indexed Job
}

// Service is a Service's name and spec.
type Service struct {
	Name      string
	ClusterIP string            `yaml:"clusterIP"`
	Selector  map[string]string `yaml:"selector"`
	Ports     []struct {
		Port int `yaml:"port"`
	} `yaml:"ports"`
}

// Job is a Job's name and spec.
type Job struct {
	Name           string
	CompletionMode string `yaml:"completionMode"`
	Completions    int    `yaml:"completions"`
	Parallelism    int    `yaml:"parallelism"`
	BackoffLimit   int    `yaml:"backoffLimit"`
	Template       struct {
		Spec PodSpec `yaml:"spec"`
	} `yaml:"template"`
}

// PodSpec is the spec of a Job's pods.
type PodSpec struct {
	Subdomain     string      `yaml:"subdomain"`
	RestartPolicy string      `yaml:"restartPolicy"`
	Containers    []Container `yaml:"containers"`
	Volumes       []Volume    `yaml:"volumes"`
}

// Container is a pod's container.
type Container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Ports   []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	Env          []EnvVar `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// EnvVar is one variable of a container: a value, or where Kubernetes takes it from.
type EnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

// Volume is a pod's volume: a claim or a directory of the node.
type Volume struct {
	Name                  string `yaml:"name"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
	HostPath *struct {
		Path string `yaml:"path"`
	} `yaml:"hostPath"`
}

// object is one document of a manifest.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec       yaml.Node         `yaml:"spec"`
	StringData map[string]string `yaml:"stringData"`
}

// Read reads the manifest in file. It fails, naming the file, on YAML it cannot read, and
// when the file has no Service or no Job, or more than one of either.
func Read(file string) (*Manifest, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("kubeemu: %w", err)
	}
	m := &Manifest{File: file, Secrets: map[string]map[string]string{}, Claims: map[string][]string{}}
	var services, jobs int
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("kubeemu: %s: %w", file, err)
		}
		switch o.Kind {
		case "Service":
			services++
			err = o.Spec.Decode(&m.Service)
			m.Service.Name = o.Metadata.Name
		case "Job":
			jobs++
			err = o.Spec.Decode(&m.Job)
			m.Job.Name = o.Metadata.Name
		case "Secret":
			m.Secrets[o.Metadata.Name] = o.StringData
		case "PersistentVolumeClaim":
			var spec struct {
				AccessModes []string `yaml:"accessModes"`
			}
			err = o.Spec.Decode(&spec)
			m.Claims[o.Metadata.Name] = spec.AccessModes
		}
		if err != nil {
			return nil, fmt.Errorf("kubeemu: %s: the %s %q: %w", file, o.Kind, o.Metadata.Name, err)
		}
	}
	if services != 1 || jobs != 1 {
		return nil, fmt.Errorf("kubeemu: %s: %d Services and %d Jobs, want one of each", file, services, jobs)
	}
	return m, nil
}

// Container returns the Job's (only) container.
func (m *Manifest) Container() *Container { return &m.Job.Template.Spec.Containers[0] }

// Pods returns the number of pods of the Job, its completions.
func (m *Manifest) Pods() int { return m.Job.Completions }

// Check reports what would keep the manifest's pods from forming one ORWL job: a Service
// that is not headless, does not select the Job's pods or is not the pods' subdomain; ports
// other than the coordinator's (jobenv.KubernetesPort); a Job that is not Indexed, does not
// run every pod at once, has no single container or a restart policy other than Never or
// OnFailure; a volume mount of no volume, a claim that is not in the manifest; and ORWL's
// variables that do not describe the Job. It names every problem it finds.
func (m *Manifest) Check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	s, j, pod := m.Service, m.Job, m.Job.Template.Spec
	if s.ClusterIP != "None" {
		bad("the Service %s is not headless (clusterIP %q, want None)", s.Name, s.ClusterIP)
	}
	if s.Selector[JobNameLabel] != j.Name || len(s.Selector) != 1 {
		bad("the Service %s selects %v, not the pods of the Job %s", s.Name, s.Selector, j.Name)
	}
	if pod.Subdomain != s.Name {
		bad("the pods' subdomain %q is not the Service %q", pod.Subdomain, s.Name)
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != jobenv.KubernetesPort {
		bad("the Service's ports %v are not the coordinator's, %d", s.Ports, jobenv.KubernetesPort)
	}
	if j.CompletionMode != "Indexed" || j.Completions < 1 || j.Completions != j.Parallelism {
		bad("the Job is %q with completions %d, parallelism %d: want Indexed, every pod at once", j.CompletionMode, j.Completions, j.Parallelism)
	}
	if pod.RestartPolicy != "Never" && pod.RestartPolicy != "OnFailure" {
		bad("restartPolicy %q: want Never or OnFailure", pod.RestartPolicy)
	}
	if len(pod.Containers) != 1 {
		bad("the pods have %d containers, want 1", len(pod.Containers))
		return fmt.Errorf("kubeemu: %s: %w", m.File, errors.Join(errs...))
	}
	c := m.Container()
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != jobenv.KubernetesPort {
		bad("the container's ports %v are not the coordinator's, %d", c.Ports, jobenv.KubernetesPort)
	}
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v Volume) bool { return v.Name == vm.Name })
		switch {
		case i < 0:
			bad("the volume %q mounted at %s is not one of the pods' volumes", vm.Name, vm.MountPath)
		case pod.Volumes[i].PersistentVolumeClaim != nil && m.Claims[pod.Volumes[i].PersistentVolumeClaim.ClaimName] == nil:
			bad("the volume %q claims %q, which is not in the manifest", vm.Name, pod.Volumes[i].PersistentVolumeClaim.ClaimName)
		}
	}
	for _, kv := range []string{"ORWL_SIZE=" + strconv.Itoa(j.Completions), "ORWL_SERVICE=" + s.Name, "ORWL_JOB_NAME=" + j.Name} {
		name, want, _ := strings.Cut(kv, "=")
		if v, err := m.Value(name); err != nil {
			bad("%v", err)
		} else if v != want {
			bad("%s is %q, want %q", name, v, want)
		}
	}
	if e := m.env("ORWL_SECRET"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		bad("ORWL_SECRET does not come from a Secret (secretKeyRef)")
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubeemu: %s: %w", m.File, errors.Join(errs...))
	}
	return nil
}

// AddSecret adds a Secret of one key, as `kubectl create secret generic NAME
// --from-literal=KEY=VALUE` does, for a manifest that expects it made that way.
func (m *Manifest) AddSecret(name, key, value string) {
	m.Secrets[name] = map[string]string{key: value}
}

// env returns the container's variable name, or nil.
func (m *Manifest) env(name string) *EnvVar {
	env := m.Container().Env
	if i := slices.IndexFunc(env, func(e EnvVar) bool { return e.Name == name }); i >= 0 {
		return &env[i]
	}
	return nil
}

// Value returns the container's variable name as Kubernetes sets it. It fails when the
// container does not set it or takes it from what the emulation does not know.
func (m *Manifest) Value(name string) (string, error) {
	e := m.env(name)
	if e == nil {
		return "", fmt.Errorf("the container does not set %s", name)
	}
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.FieldRef != nil:
		if p := e.ValueFrom.FieldRef.FieldPath; p != "metadata.labels['"+JobNameLabel+"']" {
			return "", fmt.Errorf("%s: the field %s is not emulated", name, p)
		}
		return m.Job.Name, nil
	case e.ValueFrom.SecretKeyRef != nil:
		ref := e.ValueFrom.SecretKeyRef
		v, ok := m.Secrets[ref.Name][ref.Key]
		if !ok {
			return "", fmt.Errorf("%s: the Secret %s has no key %q (not in the manifest: AddSecret makes one)", name, ref.Name, ref.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s: valueFrom takes it from what is not emulated", name)
}

// Hosts returns the names the cluster's DNS gives each pod, <job>-<index>.<service>, in
// the form netemu.New takes.
func (m *Manifest) Hosts() [][]string {
	var names [][]string
	for k := range m.Pods() {
		names = append(names, []string{fmt.Sprintf("%s-%d.%s", m.Job.Name, k, m.Service.Name)})
	}
	return names
}

// PodEnv returns the environment Kubernetes gives the container of pod k: its variables,
// in order, with those of set ("NAME=VALUE") given the value set says instead, then
// JOB_COMPLETION_INDEX and HOSTNAME. It fails when a variable cannot be resolved, or set
// names one the container does not set.
func (m *Manifest) PodEnv(k int, set ...string) ([]string, error) {
	values := map[string]string{}
	for _, kv := range set {
		name, v, _ := strings.Cut(kv, "=")
		if m.env(name) == nil {
			return nil, fmt.Errorf("kubeemu: %s: cannot replace %s: the container does not set it", m.File, name)
		}
		values[name] = v
	}
	var env []string
	for _, e := range m.Container().Env {
		v, ok := values[e.Name]
		if !ok {
			var err error
			if v, err = m.Value(e.Name); err != nil {
				return nil, fmt.Errorf("kubeemu: %s: %w", m.File, err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	return append(env, jobenv.EnvIndex+"="+strconv.Itoa(k), fmt.Sprintf("HOSTNAME=%s-%d", m.Job.Name, k)), nil
}
