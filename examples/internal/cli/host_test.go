package cli

import (
	"strings"
	"testing"

	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all"
	"github.com/orwl-go/orwl/orwl"
)

// TestTasksOnHost: the default kernel threads divide this host's cores among the tasks
// on this host, not among the whole job's.
func TestTasksOnHost(t *testing.T) {
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
		if got := (&Job{InJob: tc.inJob, Tasks: tc.tasks, Procs: tc.procs, Env: orwl.Job{LocalSize: tc.local}}).TasksOnHost(); got != tc.want {
			t.Errorf("%d tasks, %d processes, %d here, in a job %v: %d tasks on this host, want %d", tc.tasks, tc.procs, tc.local, tc.inJob, got, tc.want)
		}
	}
}

// TestKernelSpecs: ParseKernels resolves "cpu" and "auto" in the names and in the spec
// the result line prints (the mix itself is kernels.ParseMix's).
func TestKernelSpecs(t *testing.T) {
	cpu, all := kernels.AvailableOn(kernels.CPU)[0], kernels.Available()[0]
	for _, c := range []struct {
		spec, want, names string
	}{
		{"cpu:1,gonum", cpu + ":1,gonum", cpu + " gonum gonum"},
		{"gonum:2,auto", "gonum:2," + all, "gonum gonum " + all},
	} {
		names, spec, err := ParseKernels(c.spec, 3)
		if err != nil || spec != c.want || strings.Join(names, " ") != c.names {
			t.Errorf("ParseKernels(%q, 3) = %v, %q, %v; want %s, %q", c.spec, names, spec, err, c.names, c.want)
		}
	}
	for _, bad := range []string{"nosuch", "gonum:1,gonum:1", ""} {
		if _, _, err := ParseKernels(bad, 3); err == nil || !strings.HasPrefix(err.Error(), "-kernel") {
			t.Errorf("ParseKernels(%q, 3) = %v, want an error naming -kernel", bad, err)
		}
	}
}
