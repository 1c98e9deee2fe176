package main

import (
	"errors"
	"testing"

	"github.com/orwl-go/orwl/examples/matmul/summa"
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
		g    summa.Grid
		want float64
	}{
		{summa.Grid{P: 2, Q: 1}, half},                   // half of B in, half out
		{summa.Grid{P: 1, Q: 2}, half},                   // the same with A
		{summa.Grid{P: 1, Q: 4}, float64(n*n*8) * 3 / 4}, // 3 of 4 quarters of A in; its quarter to 3 others out
		{summa.Grid{P: 1, Q: 1}, 0},
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
