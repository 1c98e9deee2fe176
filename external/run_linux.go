package external

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errPlatform is nil: Linux has what Run needs.
var errPlatform error

// stderrGrace bounds the wait for the end of a program's standard error once its process
// group is killed: only a process that left the group can still hold it open.
const stderrGrace = time.Second

// inputSeals forbid any change to an input's file, and any later change to the seals.
const inputSeals = unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// fdDir is where a program finds its open descriptors by number: /dev/fd, or /proc/self/fd
// on systems without the /dev/fd link.
var fdDir = sync.OnceValue(func() string {
	if _, err := os.Stat("/dev/fd"); err == nil {
		return "/dev/fd/"
	}
	return "/proc/self/fd/"
})

// run makes the files of c from the held handles, runs the program on them, and on success
// copies the outputs into their locations.
func (c *Cmd) run(ctx context.Context) error {
	fds := make([]*os.File, len(c.files))
	defer func() {
		for _, f := range fds {
			if f != nil {
				f.Close()
			}
		}
	}()
	paths := make([]string, len(c.files))
	for i, f := range c.files {
		var err error
		if fds[i], err = f.memfd(); err != nil {
			return fmt.Errorf("external: file %q: %w", f.name, err)
		}
		paths[i] = fdDir() + strconv.Itoa(3+i) // ExtraFiles[i] is descriptor 3+i
	}
	args, env := c.expand(paths)
	var stderr tail
	cmd := &exec.Cmd{
		Path: c.Path, Args: args, Env: env, Dir: c.Dir,
		ExtraFiles: fds, Stderr: &stderr, WaitDelay: stderrGrace,
		// Pdeathsig: the program dies with this process (see wait for the thread it is tied to).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if c.Stdin != "" {
		cmd.Stdin = fds[c.index(c.Stdin)]
	}
	if c.Stdout != "" {
		cmd.Stdout = fds[c.index(c.Stdout)]
	}
	if err := wait(ctx, cmd, &stderr); err != nil {
		return err
	}
	return c.collect(fds)
}

// memfd returns a memory-backed file for f: for an input, a sealed copy of the data its
// handle maps; for an output, an empty file.
func (f file) memfd() (*os.File, error) {
	flags := unix.MFD_CLOEXEC
	if !f.output {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate("orwl-"+f.name, flags)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	m := os.NewFile(uintptr(fd), "orwl-"+f.name)
	if f.output {
		return m, nil
	}
	// WriteAt leaves the offset at 0, where a program reading its standard input starts.
	if _, err := m.WriteAt(f.h.Map(), 0); err != nil {
		m.Close()
		return nil, fmt.Errorf("writing the input: %w", err)
	}
	if _, err := unix.FcntlInt(m.Fd(), unix.F_ADD_SEALS, inputSeals); err != nil {
		m.Close()
		return nil, fmt.Errorf("sealing the input: %w", err)
	}
	return m, nil
}

// collect makes the content of every output file the data of its location. It reads every
// size first, so that a failure leaves every location unchanged.
func (c *Cmd) collect(fds []*os.File) error {
	sizes := make([]int64, len(c.files))
	for i, f := range c.files {
		if !f.output {
			continue
		}
		st, err := fds[i].Stat()
		if err != nil {
			return fmt.Errorf("external: output %q: %w", f.name, err)
		}
		sizes[i] = st.Size()
	}
	for i, f := range c.files {
		if !f.output {
			continue
		}
		data, err := f.h.Resize(int(sizes[i]))
		if err != nil {
			return fmt.Errorf("external: output %q: %w", f.name, err)
		}
		if _, err := fds[i].ReadAt(data, 0); err != nil {
			return fmt.Errorf("external: output %q: reading %d bytes: %w", f.name, len(data), err)
		}
	}
	return nil
}

// wait starts cmd in a process group of its own and waits for it to exit. When ctx is done
// first, the group is killed. When the program has exited, whatever is left in its group
// is killed before the program is reaped: until then its exit status holds the group's id,
// so the id cannot have been reused for another group. A program that exits with status 0
// is a success even if a process that left its group still holds stderr open (cmd's
// WaitDelay bounds that wait); any other end is an *Error.
func wait(ctx context.Context, cmd *exec.Cmd, stderr *tail) error {
	// Pdeathsig is sent when the thread that started the program exits. A thread exits
	// only with a goroutine that locked it, so keeping this one locked until the program is
	// reaped ties the program to this process's life, not to a thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("external: starting %s: %w", cmd.Path, err)
	}
	group := cmd.Process.Pid // Setpgid: the program leads its group
	killed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		syscall.Kill(-group, syscall.SIGKILL)
		close(killed)
	})
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, group, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	ctxKilled := !stop()
	if ctxKilled {
		<-killed // the kill must be done before the program is reaped
	}
	syscall.Kill(-group, syscall.SIGKILL)
	err := cmd.Wait()
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	if ctxKilled {
		err = context.Cause(ctx)
	}
	return &Error{Program: cmd.Path, Err: err, Stderr: stderr.bytes()}
}
