package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/orwl-go/orwl/examples/levenshtein/wavefront"
	"github.com/orwl-go/orwl/orwl"
)

// Environment of a process of this test binary that runs the program: its arguments are
// the program's, and whether its reference is wrong (to see the check fail).
const (
	childEnv  = "LEVENSHTEIN_TEST_CHILD"
	brokenEnv = "LEVENSHTEIN_TEST_BROKEN_REFERENCE"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if os.Getenv(brokenEnv) != "" {
			sequential = func(a, b []byte) int { return wavefront.Sequential(a, b) + 1 }
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// launch runs the program with args as procs processes of this test binary, as orwlrun
// would, and returns the exit status and the output.
func launch(procs int, args []string, env ...string) (int, string) {
	var out bytes.Buffer
	status := orwl.Launch{Procs: procs, Argv: append([]string{os.Args[0]}, args...),
		Env: append([]string{childEnv + "=1"}, env...), Stdout: &out, Stderr: &out}.Run()
	return status, out.String()
}

// writeFile writes s into a new file of the test's folder and returns its name.
func writeFile(t *testing.T, s string) string {
	f, err := os.CreateTemp(t.TempDir(), "string")
	if err == nil {
		_, err = f.WriteString(s)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

var resultRE = regexp.MustCompile(`(?m)^\[0\] result: la=(\d+) lb=(\d+) distance=(\d+) block=(\d+) tasks=(\d+) procs=(\d+) seconds=[0-9.]+ gcups=[0-9.]+ verified=true$`)

// jsonResult is the keys of the -json object the tests read.
type jsonResult struct {
	Distance int   `json:"distance"`
	Tasks    int   `json:"tasks"`
	Procs    int   `json:"procs"`
	Verified *bool `json:"verified"`
}

// TestProcessesGiveTheSameDistance runs the program as 1, 2 and 3 processes on strings
// from files (an empty one, unequal lengths, a file with a trailing newline) with several
// tasks and block sizes (one row, a few, more than the string): every run prints the
// distance of the sequential loop.
func TestProcessesGiveTheSameDistance(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	gen := func(n int) string { return string(wavefront.Generate(n, r.Uint64())) }
	for _, c := range []struct {
		a, b  string
		tasks string
	}{
		{"", gen(17), "3"},
		{gen(40), "", "3"},
		{gen(53) + "\n", gen(31), "4"},
		{gen(90), gen(120) + "\n", "3"},
	} {
		fa, fb := writeFile(t, c.a), writeFile(t, c.b)
		want := wavefront.Sequential([]byte(strings.TrimSuffix(c.a, "\n")), []byte(strings.TrimSuffix(c.b, "\n")))
		for procs, block := range map[int]string{1: "7", 2: "1", 3: "1000"} {
			args := []string{"-a", fa, "-b", fb, "-tasks", c.tasks, "-block", block, "-verify"}
			status, out := launch(procs, args)
			m := resultRE.FindStringSubmatch(out)
			if status != 0 || m == nil || m[3] != fmt.Sprint(want) || m[6] != fmt.Sprint(procs) || m[5] != c.tasks || m[4] != block {
				t.Fatalf("%q, %d processes: status %d, want distance %d\n%s", args, procs, status, want, out)
			}
		}
	}
}

// TestStartsItsProcesses: with -np and no launcher, the program starts its processes
// itself, and only the process of task 0 prints, without a rank prefix.
func TestStartsItsProcesses(t *testing.T) {
	t.Setenv(childEnv, "1") // the processes it starts are this test binary
	var out, errs bytes.Buffer
	if status := run([]string{"-gen", "300", "-np", "2", "-tasks", "3", "-block", "50", "-verify"}, &out, &errs); status != 0 {
		t.Fatalf("status %d\n%s%s", status, out.String(), errs.String())
	}
	a, b := wavefront.Generate(300, 1), wavefront.Generate(300, 2)
	want := fmt.Sprintf("result: la=300 lb=300 distance=%d block=50 tasks=3 procs=2 seconds=", wavefront.Sequential(a, b))
	if !strings.HasPrefix(out.String(), want) || strings.Count(out.String(), "\n") != 1 || !strings.HasSuffix(out.String(), " verified=true\n") {
		t.Fatalf("want one line %q...verified=true, got:\n%s", want, out.String())
	}
}

// TestFileInput: one trailing newline of each file is left out, and only one; strings
// this short are verified without -verify.
func TestFileInput(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"kitten\n", "sitting", 3},
		{"abc\n\n", "abc\n", 1}, // "abc\n" against "abc"
		{"\n", "", 0},
		{"", "ab\r\n", 3},
	} {
		var out, errs bytes.Buffer
		if status := run([]string{"-a", writeFile(t, c.a), "-b", writeFile(t, c.b), "-tasks", "2", "-json"}, &out, &errs); status != 0 {
			t.Fatalf("%q, %q: status %d: %s", c.a, c.b, status, errs.String())
		}
		var r jsonResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Distance != c.want || r.Tasks != 2 || r.Procs != 1 || r.Verified == nil || !*r.Verified {
			t.Fatalf("%q, %q: %+v, %v; want distance %d", c.a, c.b, r, err, c.want)
		}
	}
}

// TestVerifyOff: -verify=false skips the check, and the result says so.
func TestVerifyOff(t *testing.T) {
	var out, errs bytes.Buffer
	if status := run([]string{"-gen", "20", "-tasks", "2", "-verify=false"}, &out, &errs); status != 0 || !strings.HasSuffix(out.String(), " verified=skipped\n") {
		t.Fatalf("status %d, want 0 and verified=skipped:\n%s%s", status, out.String(), errs.String())
	}
}

// TestFailedVerificationExits3: a distance that differs from the reference is reported
// and fails the program.
func TestFailedVerificationExits3(t *testing.T) {
	status, out := launch(2, []string{"-gen", "50", "-tasks", "2", "-verify"}, brokenEnv+"=1")
	if status != exitMismatch || !strings.Contains(out, "verified=false") {
		t.Fatalf("status %d, want %d\n%s", status, exitMismatch, out)
	}
}

// TestBadFlags: one line on standard error and exit status 2, for every mistake.
func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a")
	if err := os.WriteFile(file, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{},
		{"-a", file},
		{"-b", file},
		{"-a", file, "-b", filepath.Join(dir, "missing")},
		{"-gen", "10", "-a", file},
		{"-gen", "-3"},
		{"-gen", "x"},
		{"-gen", "10", "-tasks", "0"},
		{"-gen", "10", "-tasks", "100000"},
		{"-gen", "10", "-block", "0"},
		{"-gen", "10", "-np", "0"},
		{"-gen", "10", "-np", "3", "-tasks", "2"},
		{"-gen", "10", "extra"},
		{"-bogus"},
	} {
		var out, errs bytes.Buffer
		status := run(args, &out, &errs)
		lines := strings.Split(strings.TrimSuffix(errs.String(), "\n"), "\n")
		if status != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "levenshtein: ") || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, stderr %q", args, status, out.String(), errs.String())
		}
	}
}

// TestInputIsBounded: a flag naming a device (/dev/zero, which never ends) or a file longer
// than the longest string is refused at once, naming the file, before anything of it is
// read; a pipe is read (up to that bound).
func TestInputIsBounded(t *testing.T) {
	file := writeFile(t, "abc")
	long := writeFile(t, "")
	if err := os.Truncate(long, wavefront.MaxLen+2); err != nil { // sparse: no disk
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-a", "/dev/zero", "-b", file}, "levenshtein: -a /dev/zero: not a regular file nor a pipe (a device)"},
		{[]string{"-a", file, "-b", long}, fmt.Sprintf("levenshtein: -b %s: %d bytes; a string has at most %d", long, wavefront.MaxLen+2, wavefront.MaxLen)},
	} {
		var out, errs bytes.Buffer
		if status := run(c.args, &out, &errs); status != exitUsage || strings.TrimSuffix(errs.String(), "\n") != c.want || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want status %d and %q", c.args, status, out.String(), errs.String(), exitUsage, c.want)
		}
	}
	pipe := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() { // the other end, as a shell's <(echo kitten) has it
		if w, err := os.OpenFile(pipe, os.O_WRONLY, 0); err == nil {
			w.WriteString("kitten\n")
			w.Close()
		}
	}()
	var out, errs bytes.Buffer
	if status := run([]string{"-a", pipe, "-b", writeFile(t, "sitting"), "-tasks", "2", "-json"}, &out, &errs); status != 0 {
		t.Fatalf("from a pipe: status %d: %s", status, errs.String())
	}
	var r jsonResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Distance != 3 {
		t.Errorf("from a pipe: %+v, %v; want distance 3", r, err)
	}
}
