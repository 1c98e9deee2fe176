package main

import (
	_ "embed"
	"strconv"
)

// The MPI reference of the remote hand-off: Open MPI's ping-pong of 8 bytes between two
// processes of this host, over its shared-memory transport, built with mpicc.

//go:embed pingpong/pingpong.c
var pingpongC []byte

// pingPong is the MPI ping-pong, built.
type pingPong struct {
	mpi *openMPI
	bin string
}

// buildPingPong builds the MPI ping-pong for the command cmd; ok is false, said on
// standard error, when Open MPI is missing. cleanup removes the build.
func buildPingPong(cmd string) (p pingPong, ok bool, cleanup func()) {
	mpi, bin, cleanup := buildPeer(cmd, "the MPI ping-pong", "pingpong", pingpongC, "-O2")
	return pingPong{mpi, bin}, mpi != nil, cleanup
}

// roundTrip runs the ping-pong over shared memory and returns the nanoseconds of one round
// trip: the best of rounds rounds of iters, after one such round not timed.
func (p pingPong) roundTrip(iters, rounds int) (float64, error) {
	out, err := p.mpi.launch(2, p.mpi.shm, nil, p.bin, strconv.Itoa(iters), strconv.Itoa(rounds))
	if err != nil {
		return 0, err
	}
	v, err := field(out, "round-trip")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}
