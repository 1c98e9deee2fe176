package main

import (
	"errors"
	"testing"
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
		{"matmul", "-n", "0"},
		{"matmul", "-procs", "a"},
		{"kernels", "-n", "a"},
		{"figures", "-sections", "foo"},
	} {
		err := commands[c[0]].run(c[1:])
		if !errors.As(err, new(usageError)) {
			t.Errorf("%q: %v, want a usage error", c, err)
		}
	}
}
