package main

import (
	"strconv"
	"strings"
	"testing"
)

// buildOrSkip builds a C peer; a build that fails for want of a package (MPI's headers,
// ScaLAPACK) skips the test, any other failure fails it.
func buildOrSkip(t *testing.T, mpi *openMPI, name string, src []byte, flags ...string) string {
	t.Helper()
	bin, err := mpi.build(t.TempDir(), name, src, flags...)
	switch {
	case err == nil:
		return bin
	case strings.Contains(err.Error(), "mpi.h: No such file"), strings.Contains(err.Error(), "cannot find -lscalapack"):
		t.Skip(err)
	default:
		t.Fatal(err)
	}
	return ""
}

// TestStarpuDgemmRuns multiplies a small matrix with StarPU's dgemm example, result checked
// by the example. Skipped without Debian's starpu-examples.
func TestStarpuDgemmRuns(t *testing.T) {
	s, err := findStarpuDgemm("", true)
	if err != nil {
		t.Skip(err)
	}
	secs, err := timeStarpu(s, mmResult{N: 256, NB: 128, Procs: 2, Threads: 1}, 2)
	if err != nil || secs <= 0 {
		t.Fatalf("%v seconds, %v", secs, err)
	}
}

// TestScalapackDriverRuns builds the PDGEMM driver and runs it on a 2x1 grid. Skipped without
// Open MPI's mpicc or ScaLAPACK (libopenmpi-dev, libscalapack-openmpi-dev).
func TestScalapackDriverRuns(t *testing.T) {
	mpi, err := findOpenMPI()
	if err != nil {
		t.Skip(err)
	}
	bin := buildOrSkip(t, mpi, "pdgemm", pdgemmSource, "-O2", "-lscalapack-openmpi")
	secs, err := timeScalapack(mpi, bin, mmResult{N: 256, NB: 64, Procs: 2, Grid: "2x1", Threads: 1}, 1) // fails unless verified
	if err != nil || secs <= 0 {
		t.Fatalf("%v seconds, %v", secs, err)
	}
}

// TestMPIPingPongRuns builds the MPI ping-pong and runs a few round trips over shared
// memory. Skipped without Open MPI's mpicc (libopenmpi-dev).
func TestMPIPingPongRuns(t *testing.T) {
	mpi, err := findOpenMPI()
	if err != nil {
		t.Skip(err)
	}
	bin := buildOrSkip(t, mpi, "pingpong", pingpongC, "-O2")
	out, err := mpi.launch(2, mpi.shm, nil, bin, "1000", "1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := field(out, "round-trip")
	if err != nil {
		t.Fatal(err)
	}
	if ns, err := strconv.ParseFloat(v, 64); err != nil || ns <= 0 {
		t.Fatalf("round-trip=%s: want a positive number of nanoseconds", v)
	}
}
