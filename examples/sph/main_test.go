package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/examples/sph/fluid"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
	"github.com/orwl-go/orwl/orwl"
)

// Environment of a child process of this test binary: the arguments of main, and whether its
// reference is wrong (to see the check fail).
const (
	childEnv  = "SPH_TEST_ARGS"
	brokenEnv = "SPH_TEST_BROKEN_REFERENCE"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		if os.Getenv(brokenEnv) != "" {
			sequential = func(p fluid.Params) (*fluid.State, int64, float64, error) {
				s, interactions, seconds, err := fluid.Sequential(p)
				s.VX[0] = -s.VX[0] - 1
				return s, interactions, seconds, err
			}
		}
		killjob.WritePid()
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	status := m.Run()
	killjob.Cleanup()
	os.Exit(status)
}

// launch runs main with args as procs processes of this test binary and returns the exit
// status and the output.
func launch(procs int, args string, env ...string) (int, string) {
	var out bytes.Buffer
	status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
		Env: append([]string{childEnv + "=" + args}, env...), Stdout: &out, Stderr: &out}.Run()
	return status, out.String()
}

// resultLine matches the result line and captures its checksum.
var resultLine = regexp.MustCompile(`result: particles=\d+ steps=\d+ tasks=\d+ procs=\d+ seconds=[0-9.]+ interactions=\d+ interactions_per_s=\S+ kinetic=\S+ checksum=([0-9a-f]{16}) imbalance=[0-9.]+ (?:resumed-at=\d+ )?verified=(\w+)`)

// TestProcessesGiveIdenticalResults runs a job of 3 tasks as 1, 2 and 3 processes: every
// run prints the checksum of the sequential reference.
func TestProcessesGiveIdenticalResults(t *testing.T) {
	p := fluid.Params{N: 2000, Steps: 4, Seed: 1, Tasks: 3}
	s, _, _, err := fluid.Sequential(p)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%016x", s.Checksum())
	args := fmt.Sprintf("-n %d -steps %d -tasks %d -verify=false", p.N, p.Steps, p.Tasks)
	for _, procs := range []int{1, 2, 3} {
		status, out := launch(procs, args)
		m := resultLine.FindStringSubmatch(out)
		if status != 0 || m == nil || m[1] != want || m[2] != "skipped" {
			t.Fatalf("%s, %d processes: status %d, want 0 and checksum %s\n%s", args, procs, status, want, out)
		}
	}
}

// TestFailedCheckExits3: a result that differs from the reference is reported and fails
// the program with the examples' status of a failed verification.
func TestFailedCheckExits3(t *testing.T) {
	status, out := launch(1, "-n 500 -steps 2 -tasks 1", brokenEnv+"=1")
	if status != cli.ExitMismatch || !strings.Contains(out, "verified=false") {
		t.Fatalf("status %d, want %d\n%s", status, cli.ExitMismatch, out)
	}
}

// TestJSON: -json prints the result as one JSON object with the result line's keys, the
// checksum a string of 16 hexadecimal digits.
func TestJSON(t *testing.T) {
	status, out := launch(1, "-n 500 -steps 2 -tasks 1 -json")
	var res map[string]any
	lines := strings.Split(strings.TrimSpace(out), "\n")
	line := strings.TrimPrefix(lines[len(lines)-1], "[0] ") // the last, after launch's prefix
	if err := json.Unmarshal([]byte(line), &res); status != 0 || err != nil {
		t.Fatalf("status %d, %v\n%s", status, err, out)
	}
	for _, key := range []string{"particles", "steps", "tasks", "procs", "seconds", "interactions", "interactions_per_s", "kinetic", "imbalance"} {
		if _, ok := res[key].(float64); !ok {
			t.Errorf("%s is %#v, want a number", key, res[key])
		}
	}
	if sum, _ := res["checksum"].(string); len(sum) != 16 || res["verified"] != true {
		t.Errorf("checksum %#v, verified %#v; want 16 hexadecimal digits and true", res["checksum"], res["verified"])
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for args, want := range map[string]string{
		"-n 0":                  "-n is 0",
		"-steps -1":             "-steps is -1",
		"-tasks 0":              "-tasks is 0",
		"-n 2000 -tasks 5":      "5 tasks for 2000 particles: at most 4",
		"-tasks 2x2":            "-grid",
		"-np 0":                 "-np is 0",
		"-n 100 extra":          `unexpected argument "extra"`,
		"-n 100 -np 3 -tasks 2": "3 processes for 2 tasks",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != cli.ExitUsage || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, want exit status 2 and one line saying %q\n%s", args, err, want, out)
		}
	}
}

// TestDefaultTasks: without -tasks, one task per core, but no more than the cells of a
// small problem allow.
func TestDefaultTasks(t *testing.T) {
	c, err := parse(strings.Fields("-n 8"), nil)
	if err != nil || c.Tasks != 1 {
		t.Fatalf("-n 8: %+v, %v; want 1 task (one cell)", c, err)
	}
}

// TestExactBuild runs the command, built without the race detector (ten times faster), on
// the problem's validation run of 20000 particles for 20 steps, as 1 task and as 3 tasks
// on 2 processes: both print the values of the exact C build, and the tasks' work is
// balanced within 5%.
func TestExactBuild(t *testing.T) {
	bin, err := command()
	if err != nil {
		t.Skip(err)
	}
	want := regexp.MustCompile(`interactions=45525300 interactions_per_s=\S+ kinetic=0.054524002614179487 checksum=7b4e5c70b7cba47c imbalance=([0-9.]+)`)
	for _, args := range []string{"-tasks 1", "-tasks 3 -np 2"} {
		out, err := exec.Command(bin, append(strings.Fields(args), "-n", "20000", "-steps", "20", "-verify=false")...).CombinedOutput()
		m := want.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s: %v, want %s\n%s", args, err, want, out)
		}
		// The split is computed from integers, so the imbalance is the same in every run.
		if imbalance, _ := strconv.ParseFloat(string(m[1]), 64); imbalance > 1.05 {
			t.Fatalf("%s: imbalance %v, more than 1.05\n%s", args, imbalance, out)
		}
	}
}

// command builds this command once for the tests of this package, without the race
// detector (they skip without the go command), and returns its path.
var command = sync.OnceValues(func() (string, error) { return killjob.Build("github.com/orwl-go/orwl/examples/sph", "sph") })
