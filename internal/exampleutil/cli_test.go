package exampleutil

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"
)

// config is a command line of one flag, run in this process.
type config struct {
	Where
	n int
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	n := fs.Int("n", 1, "a number")
	if err := Parse(fs, args, "usage: t [flags]", stderr); err != nil {
		return nil, err
	}
	if *n < 1 {
		return nil, errors.New("-n must be\npositive")
	}
	return &config{Where: Where{Procs: 1}, n: *n}, nil
}

func TestRun(t *testing.T) {
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{[]string{"-n", "3"}, 0, "n=3\n", ""},
		{[]string{"-h"}, 0, "", "usage: t [flags]\n  -n int\n    \ta number (default 1)\n"},
		{[]string{"-n", "0"}, ExitUsage, "", "t: -n must be positive\n"},
		{[]string{"-m"}, ExitUsage, "", "t: flag provided but not defined: -m\n"},
		{[]string{"-n", "2", "extra"}, ExitUsage, "", "t: unexpected argument \"extra\"\n"},
	} {
		var out, errs bytes.Buffer
		status := Run("t", c.args, &out, &errs, parse, func(c *config, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "n=%d\n", c.n)
			return 0
		})
		if status != c.status || out.String() != c.stdout || errs.String() != c.stderr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q", c.args, status, out.String(), errs.String(), c.status, c.stdout, c.stderr)
		}
	}
}

func TestWhere(t *testing.T) {
	if (Where{Procs: 3}).Start() != 3 || (Where{Procs: 3, InJob: true}).Start() != 1 {
		t.Fatal("Start: want Procs, or 1 under a launcher")
	}
}
