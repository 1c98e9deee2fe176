package main

import (
	"strings"
	"testing"
)

// TestHandoffRuns builds examples/handoff and orwlrun and runs one short round of both
// modes and of the MPI ping-pong (left out without Open MPI): every figure is measured.
func TestHandoffRuns(t *testing.T) {
	f, err := measureHandoff(200, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f.orwl["read"] <= 0 || f.orwl["write"] <= 0 {
		t.Fatalf("round trips %v, want both modes measured", f.orwl)
	}
	if _, err := findOpenMPI(); err == nil && f.mpi <= 0 {
		t.Fatalf("Open MPI is here, but its ping-pong was not measured: %+v", f)
	}
}

// TestHandoffResult: the example's JSON result gives its round trip; a result that did not
// verify, or no result, is an error naming the run.
func TestHandoffResult(t *testing.T) {
	ns, err := parseHandoff("run", []byte("a line of the launcher\n{\"mode\":\"read\",\"round-trip-ns\":4560.5,\"verified\":true}\n"))
	if err != nil || ns != 4560.5 {
		t.Fatalf("%v, %v; want 4560.5", ns, err)
	}
	for _, out := range []string{`{"round-trip-ns":4560.5,"verified":false}`, `{"round-trip-ns":4560.5}`, "handoff: failed"} {
		if _, err := parseHandoff("run", []byte(out)); err == nil || !strings.HasPrefix(err.Error(), "run: ") {
			t.Errorf("%q: %v, want an error naming the run", out, err)
		}
	}
}

// TestHandoffRows: one row per mode beside the MPI ping-pong, with its ratio; without Open
// MPI, the time alone.
func TestHandoffRows(t *testing.T) {
	var b strings.Builder
	handoffFigures{orwl: map[string]float64{"read": 4200, "write": 1680}, mpi: 840}.rows(&b)
	want := "| remote hand-off of 8 bytes, user program under orwlrun, remote read | 4.2µs | Open MPI shared-memory ping-pong: 840ns | 5.00x |\n" +
		"| remote hand-off of 8 bytes, user program under orwlrun, remote write | 1.68µs | Open MPI shared-memory ping-pong: 840ns | 2.00x |\n"
	if b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
	b.Reset()
	handoffFigures{orwl: map[string]float64{"write": 1680}}.rows(&b)
	if want := "| remote hand-off of 8 bytes, user program under orwlrun, remote write | 1.68µs | | |\n"; b.String() != want {
		t.Errorf("without MPI: got %q, want %q", b.String(), want)
	}
}
