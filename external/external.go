// Package external runs unmodified external programs (a Fortran solver, a Python step,
// sort, gzip) as the work of an ORWL task's critical section: the data of the task's
// handles appear to the program as files, and what the program writes becomes the new data
// of the locations it was given for writing.
//
// A Cmd names a program, its arguments and environment, and its files: inputs
// (Cmd.Input), which the program reads, and outputs (Cmd.Output), which it writes. A file is
// named; "{name}" in the arguments or the environment becomes its path. Run acquires the
// handles, runs the program while holding them, and releases them, as Handle.Section does
// around a function:
//
//	step := external.Command("python3", "step.py", "{block}", "{left}", "{new}")
//	step.Input("block", blockW)  // a write handle's current data, read-only for the program
//	step.Input("left", leftR)
//	step.Output("new", blockW)   // what the program writes to {new} becomes the block
//	for range iterations {
//		if err := step.Run(ctx); err != nil {
//			return err
//		}
//	}
//
// Locations of tasks in other processes work exactly as local ones: the program sees the
// data the handle maps.
//
// The data never touches a disk. On Linux every file is a memory-backed file (memfd)
// passed to the program as an open descriptor and named /dev/fd/N. Inputs are sealed
// against writing, so a program that writes to an input path gets EPERM and the location
// stays as it was. This was chosen over a FUSE directory: it needs no mount, no privileges,
// no /dev/fuse and no file server, and a program reads its data from memory with no round
// trip through a user-space server per read; the cost is that paths are /dev/fd/N, not names
// in one directory, so a program that lists a directory, creates sibling files or needs a
// file name extension must be given a wrapper script. Other systems get an error that
// wraps errors.ErrUnsupported.
//
// The program runs in a process group of its own. When the context is done the whole group
// is killed; when the program exits, whatever it left running in its group is killed too,
// so nothing outlives Run (a process that leaves the group, with setsid for example, is
// beyond reach); and if this process dies, the kernel kills the program (not the processes
// it started). A program that fails, is killed, or outlives the context is an *Error that
// carries the tail of its standard error.
//
// This package must not reach into the runtime: it uses only the public API of package orwl
// (Acquire, Map, Resize, Release), and it does not decide anything about the order of
// accesses: the task's handles and their FIFO positions do.
package external

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/orwl-go/orwl/orwl"
)

// stderrTail is how much of the end of a program's standard error an Error keeps.
const stderrTail = 4 << 10

// Cmd is an external program to run over the data of a task's handles. Unlike an
// exec.Cmd, a Cmd may be run many times, one run at a time, typically once per iteration;
// every run makes fresh files from the current data. A Cmd belongs to one task: like its
// handles, it is not safe for concurrent use.
type Cmd struct {
	// Path is the program to run. Command resolves a name without a slash in the
	// directories of $PATH.
	Path string
	// Args is the command line, program name first. "{name}" in any element becomes the
	// path of the file called name; any other text, braces included, is passed on as it is.
	Args []string
	// Env is the program's environment, "KEY=value" entries with "{name}" replaced as in
	// Args; nil means this process's environment, unchanged.
	Env []string
	// Dir is the program's working directory; "" means this process's.
	Dir string
	// Stdin names an input that is also the program's standard input; "" gives it the
	// null device.
	Stdin string
	// Stdout names an output that also receives the program's standard output; "" discards
	// it.
	Stdout string

	files []file
	err   error // from Command: the program was not found
}

// file is one of a Cmd's files.
type file struct {
	name   string
	h      *orwl.Handle
	output bool
}

// Command returns a Cmd that runs the program name with the given arguments, like
// exec.Command: a name without a slash is looked up in $PATH now, and if it is not found
// Run returns the error, naming the program, without acquiring anything.
func Command(name string, arg ...string) *Cmd {
	c := &Cmd{Path: name, Args: append([]string{name}, arg...)}
	if !strings.Contains(name, "/") {
		path, err := exec.LookPath(name)
		if err != nil {
			c.err = fmt.Errorf("external: program %q: %w", name, err)
		}
		c.Path = path
	}
	return c
}

// Input adds a file called name whose content is the data h maps while Run holds it. h
// may be a read or a write handle; the program cannot change the file, and the location is
// never changed through it. Mistakes (a bad or repeated name, a nil handle) are reported
// by Run.
func (c *Cmd) Input(name string, h *orwl.Handle) {
	c.files = append(c.files, file{name: name, h: h})
}

// Output adds a file called name that starts empty for the program to write. When the
// program succeeds, the file's content becomes the data of h's location, size included
// (an output the program did not write leaves the location empty); otherwise the location
// keeps its data. h must be a write handle. It may also be given to Input: that file holds
// the data from before the run. Mistakes are reported by Run.
func (c *Cmd) Output(name string, h *orwl.Handle) {
	c.files = append(c.files, file{name: name, h: h, output: true})
}

// Run runs the program once inside a critical section of its handles. It acquires every
// distinct handle of its files in the order they were first given to Input or Output
// (give them in order of FIFO position, as a task's sections must be nested), runs the
// program, and releases them in the reverse order, even when the program fails. The
// handles must not be held when Run is called.
//
// Run returns nil when the program exits with status 0, after its outputs have become the
// data of their locations. It returns an *Error, and changes no location, when the program
// exits with another status, is killed by a signal, or is still running when ctx is done,
// which kills its process group. Before acquiring anything, Run checks the Cmd and returns
// an error naming what is wrong: a program not found, a bad or repeated file name, an
// output on a read handle, a file that no argument, environment entry, Stdin or Stdout
// refers to.
func (c *Cmd) Run(ctx context.Context) (err error) {
	if err := c.check(); err != nil {
		return err
	}
	var held []*orwl.Handle
	defer func() {
		for i := len(held) - 1; i >= 0; i-- {
			if rerr := held[i].Release(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("external: %w", rerr))
			}
		}
	}()
	for _, f := range c.files {
		if containsHandle(held, f.h) {
			continue
		}
		if err := f.h.Acquire(ctx); err != nil {
			return fmt.Errorf("external: file %q: %w", f.name, err)
		}
		held = append(held, f.h)
	}
	return c.run(ctx)
}

func containsHandle(hs []*orwl.Handle, h *orwl.Handle) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// check reports the first mistake in c, before anything is acquired.
func (c *Cmd) check() error {
	if c.err != nil {
		return c.err
	}
	if errPlatform != nil {
		return errPlatform
	}
	if c.Path == "" {
		return errors.New("external: no program to run (empty Path)")
	}
	if i := c.index(c.Stdin); c.Stdin != "" && (i < 0 || c.files[i].output) {
		return fmt.Errorf("external: Stdin %q is not the name of an input", c.Stdin)
	}
	if i := c.index(c.Stdout); c.Stdout != "" && (i < 0 || !c.files[i].output) {
		return fmt.Errorf("external: Stdout %q is not the name of an output", c.Stdout)
	}
	var outputs []*orwl.Handle
	for i, f := range c.files {
		switch {
		case !validName(f.name):
			return fmt.Errorf("external: file name %q: want letters, digits, '_', '-' or '.'", f.name)
		case c.index(f.name) != i:
			return fmt.Errorf("external: file name %q given twice", f.name)
		case f.h == nil:
			return fmt.Errorf("external: file %q has a nil handle", f.name)
		case !c.refers(f):
			return fmt.Errorf("external: file %q: no argument, environment entry, Stdin or Stdout contains {%s}", f.name, f.name)
		}
		if f.output {
			if f.h.Mode() != orwl.Write {
				return fmt.Errorf("external: output %q needs a write handle, not a read handle", f.name)
			}
			if containsHandle(outputs, f.h) {
				return fmt.Errorf("external: output %q: its handle is already another output", f.name)
			}
			outputs = append(outputs, f.h)
		}
	}
	return nil
}

// validName reports whether name is non-empty and made of letters, digits, '_', '-', '.'.
func validName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return name != ""
}

// index returns the index of the file called name, or -1.
func (c *Cmd) index(name string) int {
	for i, f := range c.files {
		if f.name == name {
			return i
		}
	}
	return -1
}

// refers reports whether the program can find f: through a placeholder, Stdin or Stdout.
func (c *Cmd) refers(f file) bool {
	if f.name == c.Stdin && !f.output || f.name == c.Stdout && f.output {
		return true
	}
	ph := "{" + f.name + "}"
	for _, s := range c.Args {
		if strings.Contains(s, ph) {
			return true
		}
	}
	for _, s := range c.Env {
		if strings.Contains(s, ph) {
			return true
		}
	}
	return false
}

// expand returns Args and Env with every file's placeholder replaced by paths[i], the path
// of c.files[i]. A nil Env stays nil.
func (c *Cmd) expand(paths []string) (args, env []string) {
	pairs := make([]string, 0, 2*len(c.files))
	for i, f := range c.files {
		pairs = append(pairs, "{"+f.name+"}", paths[i])
	}
	r := strings.NewReplacer(pairs...)
	replace := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = r.Replace(s)
		}
		return out
	}
	return replace(c.Args), replace(c.Env)
}

// Error is a run whose program did not succeed: it exited with a non-zero status, was
// killed by a signal, or was killed because the context was done.
type Error struct {
	Program string // the Cmd's Path
	// Err is the context's cause when the context was done, else the *exec.ExitError that
	// says the status or the signal.
	Err error
	// Stderr is the end of what the program's processes wrote to standard error: the last
	// 4 KiB at most, after "..." when earlier bytes were dropped.
	Stderr []byte
}

// Error names the program and what went wrong.
func (e *Error) Error() string {
	msg := fmt.Sprintf("external: program %s: %v", e.Program, e.Err)
	if s := bytes.TrimSpace(e.Stderr); len(s) > 0 {
		msg += "; stderr: " + string(s)
	}
	return msg
}

// Unwrap returns Err, so that errors.Is(err, context.DeadlineExceeded) and
// errors.As(err, &exitErr) work.
func (e *Error) Unwrap() error { return e.Err }

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	b         []byte
	truncated bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*stderrTail {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrTail:]...)
		t.truncated = true
	}
	return len(p), nil
}

// bytes returns the kept bytes, "..." first when earlier ones were dropped.
func (t *tail) bytes() []byte {
	b := t.b
	if len(b) > stderrTail {
		b = b[len(b)-stderrTail:]
	}
	if t.truncated || len(b) < len(t.b) {
		return append([]byte("..."), b...)
	}
	return append([]byte(nil), b...)
}
