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

// coresScenario runs a job of one task per process and prints the cores every thread of the
// process may run on while the job runs, as "cores LIST" (one LIST when the threads agree),
// and once Run has returned, as "after LIST".
func coresScenario() int {
	procs, _ := strconv.Atoi(os.Getenv("ORWL_SIZE"))
	var during string
	err := orwl.Run(context.Background(), orwl.Config{Tasks: procs, Locations: []string{"x"}},
		func(ctx context.Context, task *orwl.Task) error {
			err := task.Schedule(ctx)
			during = threadsCores()
			return err
		})
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	fmt.Println("cores", during)
	fmt.Println("after", threadsCores())
	return 0
}

// threadsCores returns the distinct Cpus_allowed_list of this process's threads, joined.
func threadsCores() string {
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	var lists []string
	for _, f := range tasks {
		if l := allowedList(f); l != "" && !slices.Contains(lists, l) {
			lists = append(lists, l)
		}
	}
	return strings.Join(lists, " ")
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

// A job whose processes on this host are at least as many as its cores binds rank r of p, every
// thread of it, to the (r·n/p)-th of the n cores it may run on, for the job only: once
// Run returns, the process runs on the launcher's cores again. ORWL_BIND=none leaves each
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
	line := regexp.MustCompile(`\[(\d+)\] (cores|after) (.*)`)
	lists := func(procs int, env ...string) (during, after map[int]string) {
		out, status := job(t, procs, "cores", env...)
		if status != 0 {
			t.Fatalf("%d processes %v: status %d\n%s", procs, env, status, out)
		}
		during, after = map[int]string{}, map[int]string{}
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			r, _ := strconv.Atoi(m[1])
			if m[2] == "cores" {
				during[r] = m[3]
			} else {
				after[r] = m[3]
			}
		}
		if len(during) != procs || len(after) != procs {
			t.Fatalf("%d processes %v: %d and %d reported their cores\n%s", procs, env, len(during), len(after), out)
		}
		return during, after
	}
	launchers := func(what string, got map[int]string) {
		for r, l := range got {
			if l != mine {
				t.Errorf("%s: rank %d runs on cores %q, want the launcher's %q", what, r, l, mine)
			}
		}
	}
	for _, procs := range []int{len(allowed) + 1, len(allowed)} {
		if procs < 2 {
			continue // a process alone keeps the launcher's cores
		}
		during, after := lists(procs)
		for r, l := range during {
			if want := strconv.Itoa(allowed[r*len(allowed)/procs]); l != want {
				t.Errorf("%d processes on %d cores: rank %d runs on cores %q, want %s", procs, len(allowed), r, l, want)
			}
		}
		launchers(fmt.Sprintf("%d processes, once Run returned", procs), after)
	}
	during, _ := lists(len(allowed)+1, "ORWL_BIND=none")
	launchers("ORWL_BIND=none", during)
	if len(allowed) > 2 {
		during, _ := lists(len(allowed) - 1)
		launchers("fewer processes than cores", during)
	}
}
