package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orwl-go/orwl/examples/grid"
)

// TestBadFlagsAreUsageErrors: every command reports a mistake in its flags as a usageError
// (one line, exit status 2) before measuring anything.
func TestBadFlagsAreUsageErrors(t *testing.T) {
	for _, c := range [][]string{
		{"stencil", "-sizes", "x"},
		{"stencil", "-bogus"},
		{"stencil", "extra"},
		{"stencil", "-layouts", "2x"},
		{"stencil", "-rounds", "0"},
		{"wavefront", "-n", "0"},
		{"wavefront", "-blocks", "1,x"},
		{"wavefront", "-block", "0"},
		{"wavefront", "extra"},
		{"matmul", "-n", "0"},
		{"matmul", "-procs", "a"},
		{"cholesky", "-n", "0"},
		{"cholesky", "-reps", "0"},
		{"cholesky", "extra"},
		{"kernels", "-n", "a"},
		{"figures", "-sections", "foo"},
		{"figures", "-matmul-n", "x"},
		{"figures", "-first-rounds", "0"},
		{"sweep", "-nbs", "x"},
		{"sweep", "-reps", "0"},
		{"faults", "-kinds", "reboot"},
		{"faults", "-trials", "0"},
		{"faults", "-procs", "2"},
		{"faults", "-procs", "x"},
		{"checkpoint", "-every", "0"},
		{"checkpoint", "-trials", "-1"},
		{"grant", "-size", "8"},
		{"hosts", "-hosts", "1"},
		{"hosts", "-rates", "fast"},
		{"first", "-n", "x"},
		{"first", "-rounds", "0"},
		{"first", "-hugepages", "maybe"},
	} {
		err := commands[c[0]].run(c[1:])
		if !errors.As(err, new(usageError)) {
			t.Errorf("%q: %v, want a usage error", c, err)
		}
	}
}

// TestBusiestHostBytes: one task per host moves the blocks of A in its grid row and of B
// in its grid column that others own, and sends its own to the others.
func TestBusiestHostBytes(t *testing.T) {
	const n = 4096
	half := float64(n*n*8) / 2
	for _, c := range []struct {
		g    grid.Grid
		want float64
	}{
		{grid.Grid{P: 2, Q: 1}, half},                   // half of B in, half out
		{grid.Grid{P: 1, Q: 2}, half},                   // the same with A
		{grid.Grid{P: 1, Q: 4}, float64(n*n*8) * 3 / 4}, // 3 of 4 quarters of A in; its quarter to 3 others out
		{grid.Grid{P: 1, Q: 1}, 0},
	} {
		if got := busiestHostBytes(n, 512, c.g); got != c.want {
			t.Errorf("grid %s: %.0f bytes, want %.0f", c.g, got, c.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for s, want := range map[string]float64{"1gbit": 1e9, "10gbit": 1e10, "100mbit": 1e8, "2.5gbit": 2.5e9} {
		if got, err := parseRate(s); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "gbit", "-1gbit", "1gb"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
}

// TestPeakRSS: after a reset, memory touched shows in the peak.
func TestPeakRSS(t *testing.T) {
	base := resetPeakRSS()
	if base < 0 {
		t.Skip("this system does not report the peak resident set")
	}
	b := make([]byte, 64<<20)
	for i := range b {
		if i%4096 == 0 {
			b[i] = 1
		}
	}
	if grew := peakRSS() - base; grew < 60<<20 {
		t.Errorf("the peak grew by %d bytes after touching 64 MiB", grew)
	}
	b[len(b)-1] = 2 // b lives until here
}

// TestCommandRun: run parses a command's flags, gives its body -out and -json, writes its
// table and rows there, and runs a child instead when the child's variable is set.
func TestCommandRun(t *testing.T) {
	const env = "ORWL_BENCH_TEST_CHILD"
	dir := t.TempDir()
	var got string
	c := command{
		name:     "demo",
		files:    tableFiles("demo"),
		children: []child{jsonChild(env, func(v struct{ X string }) error { got = v.X; return nil })},
		setup: func(fs *flag.FlagSet) func(*report) error {
			n := fs.Int("n", 1, "a number")
			return func(rep *report) error {
				if !rep.asJSON || rep.out != dir {
					t.Errorf("the body got -json %v, -out %q; want true, %q", rep.asJSON, rep.out, dir)
				}
				rep.header("n is %d", *n)
				rep.line("row %d\n", *n)
				return rep.write([]int{*n})
			}
		},
	}
	if err := c.run([]string{"-json", "-n", "3", "-out", dir}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"demo.txt":  "# go run ./lab/bench demo -json -n 3 -out " + dir + "\n# n is 3\nrow 3\n",
		"demo.json": "[\n  3\n]\n",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if err := c.run([]string{"-n", "x"}); !errors.As(err, new(usageError)) {
		t.Errorf("-n x: %v, want a usage error", err)
	}
	t.Setenv(env, `{"X":"spec"}`)
	if err := c.run([]string{"-n", "x"}); err != nil || got != "spec" {
		t.Errorf("the child got %q, %v; want %q and no error", got, err, "spec")
	}
	t.Setenv(env, "{")
	if err := c.run(nil); err == nil || !strings.Contains(err.Error(), env) {
		t.Errorf("a child with a bad spec: %v, want an error naming %s", err, env)
	}
}

// TestDefaultOutOutsideCheckout: without -out the commands write outside the checkout.
func TestDefaultOutOutsideCheckout(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := checkoutRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(root, defaultOut); !filepath.IsAbs(defaultOut) || err == nil && !strings.HasPrefix(rel, "..") {
		t.Errorf("the default -out %s is in the checkout %s", defaultOut, root)
	}
}

// TestFiguresPaths: figures finds docs/performance.md and lab/results of the checkout from
// its root and from inside it, gives the commands -out relative to the working directory
// (absolute where that would climb out of it) and links the results from the page's
// folder; outside a checkout it says so.
func TestFiguresPaths(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "lab", "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "lab", "go.mod"), []byte("module x/lab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(root, "lab", "results")
	for dir, wantOut := range map[string]string{"": "lab/results", "lab": "results", "lab/bench": abs} {
		t.Chdir(filepath.Join(root, dir))
		f := &figuresFlags{}
		gotRoot, out, links, err := figuresPaths(f)
		if err != nil || gotRoot != root || out != filepath.FromSlash(wantOut) || links != "../lab/results" ||
			f.page != filepath.Join(root, "docs", "performance.md") || f.results != abs {
			t.Errorf("from %q: root %q, -out %q, links %q, page %q, results %q, %v; want %q, %q, ../lab/results",
				dir, gotRoot, out, links, f.page, f.results, err, root, wantOut)
		}
	}
	t.Chdir(t.TempDir())
	if _, _, _, err := figuresPaths(&figuresFlags{}); err == nil {
		t.Error("figures outside a checkout: no error")
	}
}
