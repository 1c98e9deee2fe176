package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orwl-go/orwl/examples/stencil/jacobi"
)

// The test binary is the command too, when this variable is set: its processes are copies of
// it.
const envMain = "ORWL_FLOOR_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// floor returns the command line of the command with args, not started.
func floor(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	return cmd
}

// The result is the sequential sweep's, bit for bit, whatever the number of processes.
func TestFloorResult(t *testing.T) {
	for _, procs := range []int{1, 2, 5} {
		p := jacobi.Params{Dim: 1, NX: 103, NY: 1, PX: 1, PY: 1, Iters: 37}
		out, err := floor("-np", strconv.Itoa(procs), "-n", "103", "-iters", "37").CombinedOutput()
		if err != nil {
			t.Fatalf("%d processes: %v: %s", procs, err, out)
		}
		want := fmt.Sprintf("checksum=%016x", jacobi.Checksum(jacobi.Sequential(p)))
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "per-iteration=") {
			t.Errorf("%d processes: %s; want %s and the time of an iteration", procs, out, want)
		}
	}
}

func TestFloorBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-np", "0"}, {"-np", "3", "-n", "5"}, {"-iters", "0"}, {"extra"}, {"-bogus"}} {
		var out bytes.Buffer
		cmd := floor(args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
			t.Errorf("%q: %v (%s), want exit status 2", args, err, out.String())
		}
	}
}

// A process killed ends the job: the command names it and fails, and no process is left.
func TestFloorProcessKilled(t *testing.T) {
	var out bytes.Buffer
	cmd := floor("-np", "3", "-n", "300", "-iters", "1000000000")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kids []int
	for range 1000 { // until the three processes run
		if kids = children(cmd.Process.Pid); len(kids) == 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(kids) != 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("processes %v, want 3", kids)
	}
	if p, err := os.FindProcess(kids[1]); err == nil {
		p.Kill()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(out.String(), "killed") {
			t.Errorf("%v: %s; want exit status 1 and the process killed", err, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the job goes on without a process: %s", out.String())
	}
	for _, pid := range kids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !bytes.Contains(stat, []byte(") Z ")) {
				t.Errorf("process %d outlives the job", pid)
			}
		}
	}
}

// children returns the processes whose parent is pid, from every /proc/PID/stat.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "PID (COMM) STATE PPID ...": the command may hold spaces and parentheses.
		_, rest, ok := strings.Cut(string(stat[bytes.LastIndexByte(stat, ')')+1:]), " ")
		if f := strings.Fields(rest); ok && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
