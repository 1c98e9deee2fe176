package orwl_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/orwl"
	"github.com/orwl-go/orwl/trace"
)

// readTrace parses a trace file and checks its structure: spans nest on every track and no
// grant comes before the release that caused it.
func readTrace(t *testing.T, file string) *trace.Trace {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Parse(data)
	if err != nil {
		t.Fatalf("the trace does not parse: %v", err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("the trace is inconsistent: %v", err)
	}
	return tr
}

// count returns how many events of each name the trace has on the track of task.
func count(tr *trace.Trace, rank, task int) map[string]int {
	n := map[string]int{}
	for _, e := range tr.Events {
		if e.Pid == rank && e.Tid == task {
			n[e.Name]++
		}
	}
	return n
}

func TestTracedJob(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.json")
	const tasks, iters = 4, 10
	err := orwl.Run(context.Background(), orwl.Config{Tasks: tasks, Locations: []string{"x"}, Trace: file},
		func(ctx context.Context, task *orwl.Task) error {
			_, err := runPlan(ctx, task, []planned{
				{task: 0, loc: 0, pos: 0, mode: fifo.Write}, {task: 1, loc: 0, pos: 1, mode: fifo.Read},
				{task: 2, loc: 0, pos: 1, mode: fifo.Read}, {task: 3, loc: 0, pos: 2, mode: fifo.Write},
			}, []string{"x"}, iters, nil)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	tr := readTrace(t, file)
	if got := len(tr.Tasks()); got != tasks {
		t.Fatalf("the trace has %d task tracks, want %d", got, tasks)
	}
	for task := range tasks {
		n := count(tr, 0, task)
		if n["request"] < iters || n["release"] != iters || n["x"] != iters {
			t.Errorf("task %d: %d requests, %d releases, %d sections; want at least %d, %d, %d",
				task, n["request"], n["release"], n["x"], iters, iters, iters)
		}
	}
}

func TestTracedJobAcrossProcesses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.json")
	out, status := job(t, 3, "plan", "ORWL_TRACE="+file)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, out)
	}
	tr := readTrace(t, file)
	ranks := map[int]bool{}
	for _, info := range tr.Tasks() {
		ranks[info.Rank] = true
	}
	if len(ranks) != 3 || len(tr.Tasks()) != 5 {
		t.Fatalf("the merged trace has tasks %v, want 5 tasks from 3 processes", tr.Tasks())
	}
}
