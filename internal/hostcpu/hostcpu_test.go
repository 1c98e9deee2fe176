package hostcpu

import (
	"runtime"
	"testing"
)

func TestCount(t *testing.T) {
	for list, want := range map[string]int{
		"0\n":          1,
		"0-1\n":        2,
		"0-3,8,10-11":  7,
		"":             0,
		"0-":           0,
		"3-1":          0,
		"a-b":          0,
		"0,,1":         0,
		"-1":           0,
		"0-1,4-5\n\n ": 4,
	} {
		if got := count(list); got != want {
			t.Errorf("count(%q) = %d, want %d", list, got, want)
		}
	}
}

// The host has at least the cores this process may run on.
func TestOnline(t *testing.T) {
	if n := Online(); n < runtime.NumCPU() {
		t.Errorf("Online() = %d, fewer than runtime.NumCPU() = %d", n, runtime.NumCPU())
	}
}
