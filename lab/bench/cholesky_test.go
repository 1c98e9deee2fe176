package main

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// TestCholeskyImplList: -impl takes names of the table's implementations, and a name that is
// not one, or an empty list, is a usage error before anything is measured.
func TestCholeskyImplList(t *testing.T) {
	want, err := cholWanted("dpotrf, orwl-1proc,starpu")
	if got := slices.Sorted(maps.Keys(want)); err != nil || !slices.Equal(got, []string{"dpotrf", "orwl-1proc", "starpu"}) {
		t.Fatalf("cholWanted: %v, %v", got, err)
	}
	for _, bad := range []string{"orwl,mkl", "", " , "} {
		if err := commands["cholesky"].run([]string{"-impl", bad}); !errors.As(err, new(usageError)) {
			t.Errorf("-impl %q: %v, want a usage error", bad, err)
		}
	}
}

// TestCholeskyPeersInOrder: the peers come in the order of cholImpls, those -impl leaves out
// absent, and both ORWL rows measure the same job in different numbers of processes.
func TestCholeskyPeersInOrder(t *testing.T) {
	b := &cholBench{procs: 2, reps: 1, kernel: "gonum"}
	peers, cleanup := b.peers(t.TempDir(), func(impl string) bool { return impl == "orwl-1proc" || impl == "orwl" })
	defer cleanup()
	var got []string
	for _, p := range peers {
		got = append(got, p.impl)
	}
	if !slices.Equal(got, []string{"orwl", "orwl-1proc"}) {
		t.Fatalf("peers %q, want orwl then orwl-1proc", got)
	}
}
