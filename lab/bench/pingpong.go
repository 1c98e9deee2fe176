package main

import (
	_ "embed"
	"os"
	"strconv"
)

// The MPI reference of the remote hand-off: Open MPI's ping-pong of 8 bytes between two
// processes of this host, over its shared-memory transport, built with mpicc.

//go:embed pingpong/pingpong.c
var pingpongC []byte

// mpiPingPong returns the nanoseconds of one round trip of Open MPI's shared-memory
// ping-pong (the best of three rounds of iters), or ok false, said on standard error, when
// Open MPI is missing.
func mpiPingPong(iters int) (ns float64, ok bool) {
	mpi, bin, cleanup := buildPeer("figures", "the MPI ping-pong", "pingpong", pingpongC, "-O2")
	defer cleanup()
	if mpi == nil {
		return 0, false
	}
	out, err := mpi.launch(2, mpi.shm, nil, bin, strconv.Itoa(iters), "3")
	if err == nil {
		var v string
		if v, err = field(out, "round-trip"); err == nil {
			ns, err = strconv.ParseFloat(v, 64)
		}
	}
	if err != nil {
		os.Stderr.WriteString("figures: skipping the MPI ping-pong: " + err.Error() + "\n")
		return 0, false
	}
	return ns, true
}
