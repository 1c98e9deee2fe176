package orwl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/orwl"
)

// coresScenario runs a job of one task per process, then prints the cores every thread of
// the process may run on, as "cores LIST" (one LIST when the threads agree).
func coresScenario() int {
	procs, _ := strconv.Atoi(os.Getenv("ORWL_SIZE"))
	err := orwl.Run(context.Background(), orwl.Config{Tasks: procs, Locations: []string{"x"}},
		func(ctx context.Context, task *orwl.Task) error { return task.Schedule(ctx) })
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	var lists []string
	for _, f := range tasks {
		if l := allowedList(f); l != "" && !slices.Contains(lists, l) {
			lists = append(lists, l)
		}
	}
	fmt.Println("cores", strings.Join(lists, " "))
	return 0
}

// allowedList returns the Cpus_allowed_list of a /proc status file ("" when unreadable).
func allowedList(status string) string {
	b, err := os.ReadFile(status)
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// cpus expands a Cpus_allowed_list ("0-2,5") into its cores.
func cpus(t *testing.T, list string) []int {
	var c []int
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("Cpus_allowed_list %q", list)
		}
		for k := a; k <= b; k++ {
			c = append(c, k)
		}
	}
	return c
}

// A job whose processes on this host are at least as many as its cores binds rank r, every
// thread of it, to the (r mod n)-th of the n cores it may run on; ORWL_BIND=none leaves each
// where the launcher put it, and so does a job of fewer processes than cores.
func TestProcessesAreBoundToCores(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binding to cores is Linux's")
	}
	mine := allowedList("/proc/self/status")
	allowed := cpus(t, mine)
	if len(allowed) > 8 {
		t.Skipf("%d cores: a job that outnumbers them is too large for a test", len(allowed))
	}
	line := regexp.MustCompile(`\[(\d+)\] cores (.*)`)
	lists := func(procs int, env ...string) map[int]string {
		out, status := job(t, procs, "cores", env...)
		if status != 0 {
			t.Fatalf("%d processes %v: status %d\n%s", procs, env, status, out)
		}
		got := map[int]string{}
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			r, _ := strconv.Atoi(m[1])
			got[r] = m[2]
		}
		if len(got) != procs {
			t.Fatalf("%d processes %v: %d reported their cores\n%s", procs, env, len(got), out)
		}
		return got
	}
	for _, procs := range []int{len(allowed) + 1, len(allowed)} {
		if procs < 2 {
			continue // a process alone keeps the launcher's cores
		}
		for r, l := range lists(procs) {
			if want := strconv.Itoa(allowed[r%len(allowed)]); l != want {
				t.Errorf("%d processes on %d cores: rank %d runs on cores %q, want %s", procs, len(allowed), r, l, want)
			}
		}
	}
	for r, l := range lists(len(allowed)+1, "ORWL_BIND=none") {
		if l != mine {
			t.Errorf("ORWL_BIND=none: rank %d runs on cores %q, want the launcher's %q", r, l, mine)
		}
	}
	if len(allowed) > 2 {
		for r, l := range lists(len(allowed) - 1) {
			if l != mine {
				t.Errorf("fewer processes than cores: rank %d runs on cores %q, want the launcher's %q", r, l, mine)
			}
		}
	}
}
