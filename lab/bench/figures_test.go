package main

import (
	"strings"
	"testing"
)

// TestKeptSections checks that the sections a figures run does not measure are found in the
// page's figures as written, with the day, code and setup they were measured on; a page
// written before the marks named the setup gives each section its header's.
func TestKeptSections(t *testing.T) {
	old := figuresBegin + "\nMeasured by `go run ./lab/bench figures` on AMD EPYC, 2 cores, go1.26.8, amd64: locks on ...\n" +
		"\n<!-- figures:locks 2026-11-27 9c9b69b -->\n\n| lock | table |\n|---|---|\n\n<!-- figures:locks end -->\n" +
		"\n<!-- figures:sph 2026-11-28 1a2b3c4+changes on Intel(R) Xeon(R) Processor, 2 cores, go1.26.8, amd64 -->\n\nSPH line one\nline two\n\n<!-- figures:sph end -->\n" +
		"\n<!-- figures:stencil 2026-11-28 1a2b3c4 -->\n\nunfinished, no end mark\n"
	kept := keptSections(old)
	if len(kept) != 2 {
		t.Fatalf("kept %d sections, want locks and sph: %v", len(kept), kept)
	}
	if got := kept["locks"]; got.day != "2026-11-27" || got.code != "9c9b69b" || got.setup != "AMD EPYC, 2 cores, go1.26.8, amd64" || got.body != "| lock | table |\n|---|---|" {
		t.Errorf("locks: %+v", got)
	}
	if got := kept["sph"]; got.code != "1a2b3c4+changes" || got.setup != "Intel(R) Xeon(R) Processor, 2 cores, go1.26.8, amd64" || got.body != "SPH line one\nline two" {
		t.Errorf("sph: %+v", got)
	}
	if got := keptSections(strings.Replace(old, "on AMD EPYC, 2 cores, go1.26.8, amd64:", "...:", 1))["locks"].setup; got != "an unnamed machine" {
		t.Errorf("a section of a header without a setup was measured on %q", got)
	}
}

// TestWhenMeasured checks the header's account of which sections come from which run: a
// day and code measured on two machines are two runs.
func TestWhenMeasured(t *testing.T) {
	got := whenMeasured([]figuresSection{
		{name: "locks", day: "2026-11-28", code: "b", setup: "Y"},
		{name: "kernels", day: "2026-11-27", code: "a", setup: "X"},
		{name: "matmul", day: "2026-11-27", code: "a", setup: "X"},
		{name: "sph", day: "2026-11-28", code: "b", setup: "Y"},
		{name: "scale", day: "2026-11-28", code: "b", setup: "Z"},
	})
	want := "locks and sph on 2026-11-28 (code b; Y); scale on 2026-11-28 (code b; Z); kernels and matmul on 2026-11-27 (code a; X)"
	if got != want {
		t.Errorf("whenMeasured = %q, want %q", got, want)
	}
	if got := whenMeasured([]figuresSection{{name: "locks", day: "d", code: "c", setup: "s"}}); !strings.HasPrefix(got, "locks on d") {
		t.Errorf("one section: %q", got)
	}
}

// A duration keeps four significant digits, whatever its size.
func TestNanos(t *testing.T) {
	for ns, want := range map[float64]string{4560.2: "4.56µs", 728.4: "728ns", 1318500: "1.319ms", 12.3: "12ns", 0.4: "0s"} {
		if got := nanos(ns); got != want {
			t.Errorf("nanos(%v) = %s, want %s", ns, got, want)
		}
	}
}
