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

// buildCOrSkip builds a C peer with gcc; a build that fails for want of a package (a
// header, a library) skips the test, any other failure fails it.
func buildCOrSkip(t *testing.T, name string, src []byte, flags ...string) string {
	t.Helper()
	bin, err := buildC(t.TempDir(), name, src, flags...)
	switch {
	case err == nil:
		return bin
	case strings.Contains(err.Error(), "No such file"), strings.Contains(err.Error(), "cannot find -l"), strings.Contains(err.Error(), "gcc not found"):
		t.Skip(err)
	default:
		t.Fatal(err)
	}
	return ""
}

// TestCholeskyReferencesRun builds the dpotrf and double-precision StarPU references and
// factors a small matrix with each, in both precisions for dpotrf: each checks its factor
// (a run that does not verify is an error). Skipped without gcc, LAPACKE, OpenBLAS's
// headers or StarPU (liblapacke-dev, libopenblas-dev, libstarpu-dev).
func TestCholeskyReferencesRun(t *testing.T) {
	b := &cholBench{procs: 2, nb: 64, reps: 2}
	potrf := buildCOrSkip(t, "potrf", potrfSource, "-llapacke", "-lopenblas", "-lm")
	for _, prec := range []string{"d", "s"} {
		if r, err := b.timePotrf(potrf, 256, prec); err != nil || r.Seconds <= 0 || !(r.Residual < 30) {
			t.Fatalf("potrf %s: %+v, %v", prec, r, err)
		}
	}
	starpu := buildCOrSkip(t, "starpu_dpotrf", starpuPotrfSource, starpuFlags("-llapacke", "-lopenblas", "-lm")...)
	if r, err := b.timeStarpu(starpu, 256); err != nil || r.Seconds <= 0 || !(r.Residual < 30) {
		t.Fatalf("starpu: %+v, %v", r, err)
	}
	if _, err := b.timeStarpu(starpu, 250); err == nil {
		t.Fatal("starpu accepted an N that NB does not divide")
	}
}

// TestPdpotrfDriverRuns builds the PDPOTRF driver and runs it on 2 processes, every grid
// and block size the bench tries. Skipped without Open MPI's mpicc or ScaLAPACK.
func TestPdpotrfDriverRuns(t *testing.T) {
	mpi, err := findOpenMPI()
	if err != nil {
		t.Skip(err)
	}
	bin := buildOrSkip(t, mpi, "pdpotrf", pdpotrfSource, "-O2", "-lscalapack-openmpi", "-lm")
	r, err := (&cholBench{procs: 2, reps: 1}).timeScalapack(mpi, bin, 300) // fails unless verified
	if err != nil || r.Seconds <= 0 || r.First < r.Seconds || (r.Grid != "2x1" && r.Grid != "1x2") {
		t.Fatalf("%+v, %v", r, err)
	}
}

// TestStarpuImplicitRuns runs Debian's single-precision StarPU Cholesky example, checked.
func TestStarpuImplicitRuns(t *testing.T) {
	bin, err := findStarpuExample("cholesky_implicit")
	if err != nil {
		t.Skip(err)
	}
	if r, err := (&cholBench{procs: 2, nb: 128}).timeStarpuImplicit(bin, 1024); err != nil || r.Seconds <= 0 { // large enough to take a millisecond: the example prints whole ms
		t.Fatalf("%+v, %v", r, err)
	}
}

// TestParseRefLine: a reference's line gives its times; one that did not verify, or has
// no time, is an error.
func TestParseRefLine(t *testing.T) {
	r, err := parseRefLine("first=0.5 seconds=0.25 residual=0.001 verified=true\n")
	if err != nil || r.First != 0.5 || r.Seconds != 0.25 || r.Residual != 0.001 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, bad := range []string{"first=0.5 seconds=0.25 residual=40 verified=false", "seconds=0.25 verified=true", "first=0 seconds=0 residual=0 verified=true"} {
		if _, err := parseRefLine(bad); err == nil {
			t.Errorf("parseRefLine(%q) accepted", bad)
		}
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
