package jobenv

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// kubernetes is a pod of a Kubernetes Indexed Job: the rank is JOB_COMPLETION_INDEX, the
// manifest sets ORWL_SIZE, ORWL_SERVICE, ORWL_JOB_NAME (or HOSTNAME says it) and
// ORWL_SECRET (required), and the coordinator is pod 0 at KubernetesPort. Every pod is a
// host of its own.
var kubernetes = launcher{
	source: SourceKubernetes,
	detect: func(env envReader) bool { return env.has(EnvIndex) },
	read: func(env envReader) (placement, error) {
		if !env.has(EnvSize) {
			return placement{}, fmt.Errorf("jobenv: %s is set (a pod of a Kubernetes Indexed Job) but %s is not: set it to the Job's completions in the manifest", EnvIndex, EnvSize)
		}
		p, err := readRankSize(env, EnvIndex, EnvSize)
		p.job.LocalSize = 1
		return p, err
	},
	coord: kubernetesCoord,
	secret: func(Job) ([]byte, bool, error) {
		return nil, false, fmt.Errorf("jobenv: %s is required in a Kubernetes Indexed Job: mount a Kubernetes Secret as the variable (see examples/kubernetes/matmul.yaml)", EnvSecret)
	},
}

// kubernetesCoord is pod 0's address, <job>-0.<service>:KubernetesPort.
func kubernetesCoord(env envReader, p placement) (coordinator, error) {
	service := env.first(EnvService)
	if service == "" {
		return coordinator{}, fmt.Errorf("jobenv: a Kubernetes Indexed Job (%s is set) needs %s, the headless Service that is the pods' subdomain (or %s=host:port)", EnvIndex, EnvService, EnvCoord)
	}
	name := env.first(EnvJobName)
	if name == "" {
		host, suffix := env.first("HOSTNAME"), "-"+strconv.Itoa(p.job.Rank)
		if !strings.HasSuffix(host, suffix) || len(host) == len(suffix) {
			return coordinator{}, fmt.Errorf("jobenv: a Kubernetes Indexed Job (%s is set) needs %s, the Job's name (HOSTNAME=%q does not end in %q)", EnvIndex, EnvJobName, host, suffix)
		}
		name = strings.TrimSuffix(host, suffix)
	}
	addr := net.JoinHostPort(name+"-0."+service, strconv.Itoa(KubernetesPort))
	return coordinator{addr, EnvJobName + " and " + EnvService, CoordKubernetes}, nil
}
