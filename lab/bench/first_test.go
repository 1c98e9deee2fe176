package main

import (
	"strings"
	"testing"
)

// TestFirstSummary: per N and implementation, in the order they came, the median seconds,
// page faults and ratio of the rounds, with the extreme ratios.
func TestFirstSummary(t *testing.T) {
	var rows []firstRow
	for i, r := range []struct {
		secs, ratio float64
		faults      int64
	}{{1.0, 0, 10}, {2.0, 0.5, 4}, {1.2, 0, 30}, {1.0, 1.2, 2}, {1.1, 0, 20}, {1.5, 0.7, 3}} {
		impl := "c-cold"
		if r.ratio > 0 {
			impl = "orwl"
		}
		rows = append(rows, firstRow{N: 64, Round: i/2 + 1, Impl: impl, Secs: r.secs, Ratio: r.ratio, Faults: r.faults})
	}
	got := firstSummary(rows)
	want := []firstRow{
		{N: 64, Impl: "c-cold", Secs: 1.1, Faults: 20},
		{N: 64, Impl: "orwl", Secs: 1.5, Faults: 3, Ratio: 0.7, Min: 0.5, Max: 1.2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if fig := firstFigures(append(rows, got...)); !strings.Contains(fig, "| 64 | 1.500 | 3 | 1.100 | 20 | 0.70x (0.50-1.20) |") || !strings.Contains(fig, "median of 3 alternated rounds") {
		t.Errorf("figures:\n%s", fig)
	}
}

// TestCrefCold: the C reference's cold mode times one call and counts its page faults.
func TestCrefCold(t *testing.T) {
	c, err := buildCref(t.TempDir(), "")
	if err != nil {
		t.Skipf("the C reference cannot be built here: %v", err)
	}
	secs, faults, err := c.cold(128, 1)
	if err != nil || !(secs > 0) || faults < 1 {
		t.Fatalf("cold call: %v s, %d page faults, %v", secs, faults, err)
	}
	if d, err := c.run(64, 1, 2); err != nil || d <= 0 {
		t.Fatalf("warm calls: %v, %v", d, err)
	}
}
