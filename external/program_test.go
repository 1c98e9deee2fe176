//go:build linux

package external_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orwl-go/orwl/external"
)

// The test binary is also the external program of the tests: started with programEnv set,
// it does what its arguments say and exits (see TestMain).
const programEnv = "ORWL_EXTERNAL_TEST_PROGRAM"

// command returns a Cmd that runs this test binary as the external program in mode, with
// args.
func command(mode string, args ...string) *external.Cmd {
	c := external.Command(os.Args[0], append([]string{mode}, args...)...)
	c.Env = programEnviron()
	return c
}

// programEnviron is the environment of the test program. Under the race detector a
// program that exits with status 0 waits a second for late reports unless GORACE says not to.
func programEnviron() []string {
	return append(os.Environ(), programEnv+"=1", "GORACE=atexit_sleep_ms=0")
}

// transform is what mode "transform" writes: n bytes derived from in, so that a test can
// tell which input an output came from and that all of it arrived.
func transform(in []byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		if len(in) == 0 {
			out[i] = byte(i % 251)
		} else {
			out[i] = in[i%len(in)] ^ byte(i%13)
		}
	}
	return out
}

// pattern is the data a test puts in a location: n bytes that depend on seed.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*31 + i/251)
	}
	return b
}

// runProgram is the external program: it returns its exit status.
func runProgram(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
		return 1
	}
	if len(args) == 0 {
		return fail("no mode")
	}
	switch mode, args := args[0], args[1:]; mode {
	case "transform": // IN OUT N: write transform(IN, N) to OUT; a path may follow "--in=" or
		// "--out=", and "env" reads it from $IN or $OUT
		for i, v := range []string{"IN", "OUT"} {
			if args[i] == "env" {
				args[i] = os.Getenv(v)
			}
			args[i] = strings.TrimPrefix(args[i], "--"+strings.ToLower(v)+"=")
		}
		in, err := os.ReadFile(args[0])
		if err != nil {
			return fail("%v", err)
		}
		n, _ := strconv.Atoi(args[2])
		if err := os.WriteFile(args[1], transform(in, n), 0o600); err != nil {
			return fail("%v", err)
		}
	case "cat": // standard input to standard output
		var b bytes.Buffer
		if _, err := b.ReadFrom(os.Stdin); err != nil {
			return fail("%v", err)
		}
		if _, err := os.Stdout.Write(b.Bytes()); err != nil {
			return fail("%v", err)
		}
	case "fail": // write to stderr, exit 3
		fmt.Fprintln(os.Stderr, "step 7: matrix is singular")
		return 3
	case "noisy": // 100 numbered lines of 1 KiB on stderr, exit 1
		for i := range 100 {
			fmt.Fprintf(os.Stderr, "line %d %s\n", i, bytes.Repeat([]byte("x"), 1000))
		}
		return 1
	case "kill": // killed by SIGKILL
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour) // not reached: the signal ends the process
	case "hang", "leave": // READY: start a child, write "pid childpid" to READY, then hang or exit 0
		child := exec.Command(os.Args[0], "sleep")
		child.Env, child.Stderr = programEnviron(), os.Stderr
		if err := child.Start(); err != nil {
			return fail("%v", err)
		}
		if err := os.WriteFile(args[0], fmt.Appendf(nil, "%d %d\n", os.Getpid(), child.Process.Pid), 0o600); err != nil {
			return fail("%v", err)
		}
		if mode == "hang" {
			time.Sleep(time.Hour)
		}
	case "pause": // READY: write "pid" to READY, then hang
		if err := os.WriteFile(args[0], fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600); err != nil {
			return fail("%v", err)
		}
		time.Sleep(time.Hour)
	case "sleep": // a process that would outlive its parent
		time.Sleep(time.Hour)
	case "writeinput": // PATH: write to PATH in place and truncated; exit 0 only if one worked
		refused := 0
		if f, err := os.OpenFile(args[0], os.O_WRONLY, 0); err == nil {
			if _, err := f.Write([]byte("overwritten")); err != nil {
				fmt.Fprintln(os.Stderr, "write:", err)
				refused++
			}
			f.Close()
		}
		if f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_TRUNC, 0); err != nil {
			fmt.Fprintln(os.Stderr, "truncate:", err)
			refused++
		} else {
			f.Close()
		}
		if refused == 2 {
			return 1
		}
	default:
		return fail("unknown mode %q", mode)
	}
	return 0
}
