package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/internal/cli"
	"github.com/orwl-go/orwl/internal/testemu/killjob"
	"github.com/orwl-go/orwl/orwl"
)

// Environment of a child process of this test binary: the arguments of main, and whether
// the writer stores a wrong value (to see the check fail).
const (
	childEnv  = "HANDOFF_TEST_ARGS"
	brokenEnv = "HANDOFF_TEST_BROKEN_WRITER"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		if os.Getenv(brokenEnv) != "" {
			stamp = func(round uint64) uint64 {
				if round == 7 {
					return 0
				}
				return round
			}
		}
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	status := m.Run()
	killjob.Cleanup()
	os.Exit(status)
}

// resultLine is the result line of task 0 under a launcher, its mode captured.
var resultLine = regexp.MustCompile(`(?m)^\[0\] result: mode=(\w+) size=8 iters=50 warmup=5 tasks=2 procs=2 seconds=[0-9.]+ round-trip-ns=[0-9.]+ verified=true$`)

// TestModesUnderOrwlrun runs both modes as a user runs them, under orwlrun -np 2: task 1
// in the other process reads, or writes, task 0's location, and every round's value
// reaches the reader in order.
func TestModesUnderOrwlrun(t *testing.T) {
	bin, err := killjob.Orwlrun()
	if err != nil {
		t.Skip(err)
	}
	for _, mode := range []string{"read", "write"} {
		cmd := exec.Command(bin, "-np", "2", os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=-mode "+mode+" -iters 50 -warmup 5", "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		if m := resultLine.FindStringSubmatch(string(out)); err != nil || m == nil || m[1] != mode {
			t.Fatalf("orwlrun -np 2 handoff -mode %s: %v, want a verified result line\n%s", mode, err, out)
		}
	}
}

// TestOneProcess: with -np 1 both tasks are goroutines of this process; the JSON object
// has the result line's keys.
func TestOneProcess(t *testing.T) {
	for _, mode := range []string{"read", "write"} {
		var out, errs bytes.Buffer
		if status := run([]string{"-np", "1", "-mode", mode, "-size", "64", "-iters", "30", "-json"}, &out, &errs); status != 0 {
			t.Fatalf("-mode %s: status %d: %s", mode, status, errs.String())
		}
		var r struct {
			Mode        string   `json:"mode"`
			Size        int      `json:"size"`
			Iters       int      `json:"iters"`
			Tasks       int      `json:"tasks"`
			Procs       int      `json:"procs"`
			Seconds     *float64 `json:"seconds"`
			RoundTripNs *float64 `json:"round-trip-ns"`
			Verified    *bool    `json:"verified"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Mode != mode || r.Size != 64 || r.Iters != 30 || r.Tasks != 2 || r.Procs != 1 ||
			r.Seconds == nil || r.RoundTripNs == nil || *r.RoundTripNs <= 0 || r.Verified == nil || !*r.Verified {
			t.Fatalf("-mode %s: %+v, %v\n%s", mode, r, err, out.String())
		}
	}
}

// TestWrongValueExits3: a round whose value the reader does not see fails the check, in
// both modes.
func TestWrongValueExits3(t *testing.T) {
	for _, mode := range []string{"read", "write"} {
		var out bytes.Buffer
		status := orwl.Launch{Procs: 2, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{childEnv + "=-mode " + mode + " -iters 20", brokenEnv + "=1"}, Stdout: &out, Stderr: &out}.Run()
		if status != cli.ExitMismatch || !strings.Contains(out.String(), "verified=false") {
			t.Fatalf("-mode %s: status %d, want %d and verified=false\n%s", mode, status, cli.ExitMismatch, out.String())
		}
	}
}

// TestBadFlagsExit2: one line on standard error, naming the mistake, and exit status 2.
func TestBadFlagsExit2(t *testing.T) {
	for args, want := range map[string]string{
		"-mode bogus":  `-mode is "bogus"; need read or write`,
		"-size 4":      "-size is 4; need at least 8",
		"-iters 0":     "-iters is 0; need at least 1",
		"-warmup -1":   "-warmup is -1; need at least 0",
		"-tasks 1":     "-tasks is 1; the hand-off is between exactly 2 tasks",
		"-tasks 3":     "-tasks is 3",
		"-np 3":        "-np is 3",
		"-mode read x": `unexpected argument "x"`,
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+args)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != cli.ExitUsage || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 ||
			!strings.HasPrefix(string(out), "handoff: ") || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, want exit status 2 and one line saying %q\n%s", args, err, want, out)
		}
	}
}
