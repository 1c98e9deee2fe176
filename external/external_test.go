//go:build linux

package external_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/orwl-go/orwl/external"
	"github.com/orwl-go/orwl/orwl"
)

func TestMain(m *testing.M) {
	if os.Getenv(programEnv) != "" {
		os.Exit(runProgram(os.Args[1:]))
	}
	if ready := os.Getenv(runnerEnv); ready != "" {
		fmt.Fprintln(os.Stderr, command("pause", ready).Run(context.Background()))
		os.Exit(1)
	}
	if _, ok := os.LookupEnv(jobEnv); ok {
		if err := jobProcess(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// loc is a location of a test job: its initial data and the mode of the handle the test
// body gets on it.
type loc struct {
	name string
	data []byte
	mode orwl.Mode
}

// runJob runs body as the only task of a one-process job. Every location starts with its
// data (written at FIFO position 0); body gets a one-shot handle per location, in its mode,
// at position 1; runJob returns the data of every location afterwards (read at position 2)
// and body's error.
func runJob(t *testing.T, locs []loc, body func(ctx context.Context, h map[string]*orwl.Handle) error) (map[string][]byte, error) {
	t.Helper()
	names := make([]string, len(locs))
	for i, l := range locs {
		names[i] = l.name
	}
	final := map[string][]byte{}
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: names},
		func(ctx context.Context, tk *orwl.Task) error {
			var fill, read []*orwl.Handle
			h := map[string]*orwl.Handle{}
			for _, l := range locs {
				fill = append(fill, tk.WriteInsertOnce(tk.Loc(0, l.name), 0))
				if l.mode == orwl.Write {
					h[l.name] = tk.WriteInsertOnce(tk.Loc(0, l.name), 1)
				} else {
					h[l.name] = tk.ReadInsertOnce(tk.Loc(0, l.name), 1)
				}
				read = append(read, tk.ReadInsertOnce(tk.Loc(0, l.name), 2))
			}
			if err := tk.Schedule(ctx); err != nil {
				return err
			}
			for i, l := range locs {
				if err := fill[i].Acquire(ctx); err != nil {
					return err
				}
				b, err := fill[i].Resize(len(l.data))
				if err != nil {
					return err
				}
				copy(b, l.data)
				if err := fill[i].Release(); err != nil {
					return err
				}
			}
			berr := body(ctx, h)
			for _, hd := range h {
				hd.Close() // the body may not have used it
			}
			for i, l := range locs {
				if err := read[i].Section(ctx, func(b []byte) error {
					final[l.name] = bytes.Clone(b)
					return nil
				}); err != nil {
					return err
				}
			}
			return berr
		})
	return final, err
}

// TestSizes runs a program that reads an input and writes an output of another size, for
// sizes from 0 to several MiB: the output's content and size become the location's, and
// the input is unchanged.
func TestSizes(t *testing.T) {
	for _, tc := range []struct{ in, out int }{
		{0, 0}, {0, 10}, {10, 0}, {1, 1}, {4095, 4097}, {4096, 4096},
		{100_000, 3}, {3, 100_000}, {1 << 20, 5<<20 + 1}, {5<<20 + 1, 1 << 20},
	} {
		t.Run(fmt.Sprintf("%d-to-%d", tc.in, tc.out), func(t *testing.T) {
			in := pattern(1, tc.in)
			got, err := runJob(t, []loc{{"in", in, orwl.Read}, {"out", pattern(2, 77), orwl.Write}},
				func(ctx context.Context, h map[string]*orwl.Handle) error {
					return runInOut(ctx, h, command("transform", "{in}", "{out}", strconv.Itoa(tc.out)))
				})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got["out"], transform(in, tc.out)) {
				t.Errorf("output: %d bytes, want %d bytes of transform(input)", len(got["out"]), tc.out)
			}
			if !bytes.Equal(got["in"], in) {
				t.Error("the input location changed")
			}
		})
	}
}

// TestPlacement gives the program its files in every supported way: inside an argument, in
// the environment, as standard input and output; and one write handle as both input and
// output.
func TestPlacement(t *testing.T) {
	in := pattern(3, 5000)
	for _, tc := range []struct {
		name string
		cmd  func(h map[string]*orwl.Handle) *external.Cmd
		want map[string][]byte
	}{
		{"inside an argument", func(h map[string]*orwl.Handle) *external.Cmd {
			c := command("transform", "--in={in}", "--out={out}", "6000")
			c.Input("in", h["in"])
			c.Output("out", h["out"])
			return c
		}, map[string][]byte{"in": in, "out": transform(in, 6000)}},
		{"environment", func(h map[string]*orwl.Handle) *external.Cmd {
			c := command("transform", "env", "env", "10")
			c.Env = append(programEnviron(), "IN={in}", "OUT={out}")
			c.Input("in", h["in"])
			c.Output("out", h["out"])
			return c
		}, map[string][]byte{"in": in, "out": transform(in, 10)}},
		{"stdio", func(h map[string]*orwl.Handle) *external.Cmd {
			c := command("cat")
			c.Input("in", h["in"])
			c.Output("out", h["out"])
			c.Stdin, c.Stdout = "in", "out"
			return c
		}, map[string][]byte{"in": in, "out": in}},
		{"in-place", func(h map[string]*orwl.Handle) *external.Cmd {
			c := command("transform", "{old}", "{new}", "7")
			c.Input("old", h["out"])
			c.Output("new", h["out"])
			return c
		}, map[string][]byte{"in": in, "out": transform(pattern(4, 100), 7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runJob(t, []loc{{"in", in, orwl.Read}, {"out", pattern(4, 100), orwl.Write}},
				func(ctx context.Context, h map[string]*orwl.Handle) error { return tc.cmd(h).Run(ctx) })
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if !bytes.Equal(got[name], want) {
					t.Errorf("%s: %d bytes, not the %d expected", name, len(got[name]), len(want))
				}
			}
		})
	}
}

// TestIterations runs one Cmd in every iteration of iterative handles: each run sees the
// data the previous one wrote.
func TestIterations(t *testing.T) {
	const iters = 4
	var got []byte
	err := orwl.Run(context.Background(), orwl.Config{Tasks: 1, Locations: []string{"x"}},
		func(ctx context.Context, tk *orwl.Task) error {
			tk.Scale("x", 3)
			x := tk.WriteInsert(tk.Loc(0, "x"), 0)
			if err := tk.Schedule(ctx); err != nil {
				return err
			}
			c := command("transform", "{old}", "{new}", "5")
			c.Input("old", x)
			c.Output("new", x)
			for range iters {
				if err := c.Run(ctx); err != nil {
					return err
				}
			}
			return x.Section(ctx, func(b []byte) error { got = bytes.Clone(b); return nil })
		})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 3)
	for range iters {
		want = transform(want, 5)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("after %d runs: %v, want %v", iters, got, want)
	}
}

// TestFailures: a program that does not succeed is an *Error with the tail of its stderr,
// and no location changes.
func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		status string   // in the error
		stderr []string // in Error.Stderr
	}{
		{"fail", "exit status 3", []string{"step 7: matrix is singular"}},
		{"kill", "signal: killed", nil},
		{"noisy", "exit status 1", []string{"line 99 xxx"}},
		{"writeinput", "exit status 1", []string{
			"write: write /dev/fd/3: operation not permitted",
			"truncate: open /dev/fd/3: operation not permitted"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			in, out := pattern(5, 3000), pattern(6, 40)
			got, err := runJob(t, []loc{{"in", in, orwl.Read}, {"out", out, orwl.Write}},
				func(ctx context.Context, h map[string]*orwl.Handle) error {
					return runInOut(ctx, h, command(tc.mode, "{in}", "{out}"))
				})
			var e *external.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want an *external.Error", err)
			}
			if !strings.Contains(err.Error(), tc.status) {
				t.Errorf("error %q: want %q", err, tc.status)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(string(e.Stderr), want) {
					t.Errorf("stderr %q: want %q", e.Stderr, want)
				}
			}
			if len(e.Stderr) > 4<<10+3 {
				t.Errorf("the stderr tail holds %d bytes", len(e.Stderr))
			}
			if !bytes.Equal(got["in"], in) || !bytes.Equal(got["out"], out) {
				t.Error("a location changed")
			}
		})
	}
}

// runInOut runs c with the files "in" and "out" on the handles of the same names.
func runInOut(ctx context.Context, h map[string]*orwl.Handle, c *external.Cmd) error {
	c.Input("in", h["in"])
	c.Output("out", h["out"])
	return c.Run(ctx)
}

// gone waits (at most 10 seconds) until process pid has exited, and reports whether it has.
func gone(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // exited and reaped
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000) // readable once the process has exited
		if err != unix.EINTR {
			return err == nil && n == 1
		}
	}
}

// readyPipe makes a named pipe that a test program writes a line of n process ids to when
// it is ready, and returns its path and a channel that receives the ids. The pipe is closed
// when the test ends.
func readyPipe(t *testing.T, n int) (string, <-chan []int) {
	path := filepath.Join(t.TempDir(), "ready")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0) // opening read-write never blocks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ids := make(chan []int, 1)
	go func() {
		if pids, ok := scanPids(f, n); ok { // else closed: the test is over
			ids <- pids
		}
	}()
	return path, ids
}

// TestContextKillsGroup: a program that hangs, with a child of its own, is killed with its
// whole process group when the context is done; Run returns the context's cause.
func TestContextKillsGroup(t *testing.T) {
	ready, ids := readyPipe(t, 2)
	stopped := errors.New("test: the program hung")
	var pids []int
	_, err := runJob(t, []loc{{"in", pattern(7, 100), orwl.Read}},
		func(ctx context.Context, h map[string]*orwl.Handle) error {
			ctx, cancel := context.WithCancelCause(ctx)
			watched := make(chan struct{})
			go func() { // cancel once the program and its child run
				defer close(watched)
				select {
				case pids = <-ids:
					cancel(stopped)
				case <-ctx.Done():
				}
			}()
			c := command("hang", ready, "{in}")
			c.Input("in", h["in"])
			err := c.Run(ctx)
			cancel(nil) // the watcher ends if the program ended first
			<-watched
			return err
		})
	if !errors.Is(err, stopped) {
		t.Fatalf("error %v: want the context's cause", err)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d of the program's group is still running", pid)
		}
	}
}

// runnerEnv makes a process of this test binary run the program "pause" with the named
// pipe it holds, and never return (see TestProgramDiesWithProcess).
const runnerEnv = "ORWL_EXTERNAL_TEST_RUNNER"

// TestProgramDiesWithProcess: when the process that runs a program is killed, the kernel
// kills the program.
func TestProgramDiesWithProcess(t *testing.T) {
	ready, ids := readyPipe(t, 1)
	runner := exec.Command(os.Args[0], "-test.run=^$")
	runner.Env = append(os.Environ(), runnerEnv+"="+ready)
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- runner.Wait() }()
	select {
	case pids := <-ids:
		runner.Process.Kill()
		<-exited
		if !gone(pids[0]) {
			t.Errorf("the program %d outlived the process that ran it", pids[0])
		}
	case err := <-exited:
		t.Fatalf("the runner ended before its program was ready: %v", err)
	}
}

// TestDeadline: a program that hangs past the context's deadline, with a child of its own,
// is an *Error that matches context.DeadlineExceeded, and its process group is gone. The
// deadline doubles until the program had the time to start its child and say so.
func TestDeadline(t *testing.T) {
	for d := 250 * time.Millisecond; ; d *= 2 {
		pidFile := filepath.Join(t.TempDir(), "pids")
		_, err := runJob(t, []loc{{"in", nil, orwl.Read}},
			func(ctx context.Context, h map[string]*orwl.Handle) error {
				ctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				c := command("hang", pidFile, "{in}")
				c.Input("in", h["in"])
				return c.Run(ctx)
			})
		var e *external.Error
		if !errors.As(err, &e) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v: want an *external.Error matching context.DeadlineExceeded", err)
		}
		pids, ok := readPids(pidFile, 2)
		if !ok && d < 10*time.Second {
			continue
		}
		if !ok {
			t.Fatal("the program did not start its child in 10 seconds")
		}
		for _, pid := range pids {
			if !gone(pid) {
				t.Errorf("process %d of the program's group is still running", pid)
			}
		}
		return
	}
}

// readPids reads n process ids from file, and reports whether it could.
func readPids(file string, n int) ([]int, bool) {
	f, err := os.Open(file)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	return scanPids(f, n)
}

// scanPids reads n process ids from r, and reports whether it could.
func scanPids(r io.Reader, n int) ([]int, bool) {
	br := bufio.NewReader(r)
	pids := make([]int, n)
	for i := range pids {
		if _, err := fmt.Fscan(br, &pids[i]); err != nil {
			return nil, false
		}
	}
	return pids, true
}

// TestLeftoversKilled: a program that succeeds but leaves a child running: the child is
// killed with the group.
func TestLeftoversKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	got, err := runJob(t, []loc{{"out", nil, orwl.Write}},
		func(ctx context.Context, h map[string]*orwl.Handle) error {
			c := command("leave", pidFile, "{out}")
			c.Output("out", h["out"])
			return c.Run(ctx)
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got["out"]) != 0 {
		t.Errorf("an output the program did not write holds %d bytes, want 0", len(got["out"]))
	}
	pids, ok := readPids(pidFile, 2)
	if !ok {
		t.Fatal("the program did not say which child it started")
	}
	if !gone(pids[1]) {
		t.Errorf("the program's child %d is still running", pids[1])
	}
}

// TestMistakes: a Cmd that cannot work is refused with an error naming the mistake, before
// any handle is acquired: the task can go on using them.
func TestMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  func(h map[string]*orwl.Handle) *external.Cmd
		want string
	}{
		{"missing program", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("orwl-no-such-program", "{in}")
			c.Input("in", h["in"])
			return c
		}, `program "orwl-no-such-program": exec: "orwl-no-such-program": executable file not found in $PATH`},
		{"missing path", func(h map[string]*orwl.Handle) *external.Cmd {
			return external.Command("/no/such/program")
		}, "starting /no/such/program: fork/exec /no/such/program: no such file or directory"},
		{"bad name", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{a b}")
			c.Input("a b", h["in"])
			return c
		}, `file name "a b": want letters`},
		{"empty name", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{}")
			c.Input("", h["in"])
			return c
		}, `file name "": want letters`},
		{"name twice", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{in}")
			c.Input("in", h["in"])
			c.Output("in", h["out"])
			return c
		}, `file name "in" given twice`},
		{"nil handle", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{in}")
			c.Input("in", nil)
			return c
		}, `file "in" has a nil handle`},
		{"not referred to", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{input}")
			c.Input("in", h["in"])
			return c
		}, `file "in": no argument, environment entry, Stdin or Stdout contains {in}`},
		{"output on a read handle", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{in}")
			c.Output("in", h["in"])
			return c
		}, `output "in" needs a write handle`},
		{"output twice", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true", "{a}", "{b}")
			c.Output("a", h["out"])
			c.Output("b", h["out"])
			return c
		}, `output "b": its handle is already another output`},
		{"stdin not an input", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true")
			c.Output("out", h["out"])
			c.Stdin = "out"
			return c
		}, `Stdin "out" is not the name of an input`},
		{"stdout not an output", func(h map[string]*orwl.Handle) *external.Cmd {
			c := external.Command("true")
			c.Input("in", h["in"])
			c.Stdout = "in"
			return c
		}, `Stdout "in" is not the name of an output`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := pattern(8, 10), pattern(9, 10)
			var runErr error
			got, err := runJob(t, []loc{{"in", in, orwl.Read}, {"out", out, orwl.Write}},
				func(ctx context.Context, h map[string]*orwl.Handle) error {
					runErr = tc.cmd(h).Run(ctx)
					// Nothing was acquired: the handles are still usable.
					return errors.Join(h["in"].Section(ctx, func([]byte) error { return nil }),
						h["out"].Section(ctx, func([]byte) error { return nil }))
				})
			if err != nil {
				t.Fatalf("the handles were not left alone: %v", err)
			}
			if runErr == nil || !strings.Contains(runErr.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", runErr, tc.want)
			}
			if !bytes.Equal(got["in"], in) || !bytes.Equal(got["out"], out) {
				t.Error("a location changed")
			}
		})
	}
}

// TestMissingProgramEndsTask: a task whose program is missing returns the error, which
// ends the job with it; nothing is left running (goleak checks this binary at exit).
func TestMissingProgramEndsTask(t *testing.T) {
	_, err := runJob(t, []loc{{"in", nil, orwl.Read}},
		func(ctx context.Context, h map[string]*orwl.Handle) error {
			c := external.Command("orwl-no-such-program", "{in}")
			c.Input("in", h["in"])
			return c.Run(ctx)
		})
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "orwl-no-such-program") {
		t.Fatalf("error %v: want exec.ErrNotFound naming the program", err)
	}
}

// TestHeldHandle: Run acquires its handles itself; one already held is an error.
func TestHeldHandle(t *testing.T) {
	_, err := runJob(t, []loc{{"in", nil, orwl.Read}},
		func(ctx context.Context, h map[string]*orwl.Handle) error {
			if err := h["in"].Acquire(ctx); err != nil {
				return err
			}
			defer h["in"].Release()
			c := command("transform", "{in}", "/dev/null", "0")
			c.Input("in", h["in"])
			return c.Run(ctx)
		})
	if !errors.Is(err, orwl.ErrHeld) || !strings.Contains(err.Error(), `file "in"`) {
		t.Fatalf("error %v: want orwl.ErrHeld naming the file", err)
	}
}

// The multi-process test: this test binary, started by orwl.Launch with jobEnv set, is a
// process of a job of jobTasks tasks. Every task fills its "src" (position 0); then task i
// runs the program on the src of task i+1 and writes the dst of task i+2 (position 1); then
// every task checks its own dst (position 2). Over 2 or 3 processes, the program reads and
// writes locations of tasks in other processes.
const (
	jobEnv   = "ORWL_EXTERNAL_TEST_JOB"
	jobTasks = 3
)

// jobSize is the size of task k's src; the dst of task k is written from the src of task
// k+2 with size jobSize(k)+1000.
func jobSize(k int) int { return []int{0, 100_003, 1 << 20}[k] }

func jobProcess() error {
	return orwl.Run(context.Background(), orwl.Config{Tasks: jobTasks, Locations: []string{"src", "dst"}},
		func(ctx context.Context, tk *orwl.Task) error {
			me, n := tk.ID(), tk.NumTasks()
			from, to := (me+1)%n, (me+2)%n
			tk.Scale("src", jobSize(me))
			fill := tk.WriteInsertOnce(tk.Loc(me, "src"), 0)
			in := tk.ReadInsertOnce(tk.Loc(from, "src"), 1)
			out := tk.WriteInsertOnce(tk.Loc(to, "dst"), 1)
			check := tk.ReadInsertOnce(tk.Loc(me, "dst"), 2)
			if err := tk.Schedule(ctx); err != nil {
				return err
			}
			if err := fill.Section(ctx, func(b []byte) error { copy(b, pattern(me, len(b))); return nil }); err != nil {
				return err
			}
			c := command("transform", "{in}", "{out}", strconv.Itoa(jobSize(to)+1000))
			c.Input("in", in)
			c.Output("out", out)
			if err := c.Run(ctx); err != nil {
				return err
			}
			return check.Section(ctx, func(b []byte) error {
				src := (me + 2) % n
				if want := transform(pattern(src, jobSize(src)), jobSize(me)+1000); !bytes.Equal(b, want) {
					return fmt.Errorf("task %d: dst holds %d bytes, not the %d from task %d's src", me, len(b), len(want), src)
				}
				fmt.Printf("task %d on process %d: dst ok\n", me, tk.ProcOf(me))
				return nil
			})
		})
}

func TestProcesses(t *testing.T) {
	for procs := 1; procs <= 3; procs++ {
		var out bytes.Buffer
		status := orwl.Launch{Procs: procs, Argv: []string{os.Args[0], "-test.run=^$"},
			Env: []string{jobEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stdout: &out, Stderr: &out}.Run()
		if status != 0 || strings.Count(out.String(), "dst ok") != jobTasks {
			t.Fatalf("%d processes: status %d\n%s", procs, status, out.String())
		}
	}
}

func TestErrorMessage(t *testing.T) {
	e := &external.Error{Program: "/bin/solver", Err: syscall.EIO, Stderr: []byte("  bad input\n")}
	if got, want := e.Error(), "external: program /bin/solver: input/output error; stderr: bad input"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if !errors.Is(e, syscall.EIO) {
		t.Fatal("Unwrap does not give Err")
	}
}
