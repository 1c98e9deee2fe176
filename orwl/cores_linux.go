package orwl

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindToCore binds every thread of this process to the (rank·n/local)-th of the n cores it
// may run on, when local processes are at least as many (consecutive ranks share a core;
// see placeOnCores), and returns that core (-1: not bound) and a function that gives every
// thread the cores it had back. The runtime's later threads inherit the binding (or its
// end) from the thread that makes them.
func bindToCore(rank, local int) (int, func(), error) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return -1, func() {}, fmt.Errorf("the cores this process may run on: %w", err)
	}
	n := allowed.Count()
	if local < n {
		return -1, func() {}, nil
	}
	cpu := nthCPU(&allowed, rank*n/local)
	var one unix.CPUSet
	one.Set(cpu)
	if err := setThreadsAffinity(&one); err != nil {
		setThreadsAffinity(&allowed)
		return -1, func() {}, fmt.Errorf("binding to core %d: %w", cpu, err)
	}
	return cpu, func() { setThreadsAffinity(&allowed) }, nil
}

// setThreadsAffinity lets every thread of this process run on the cores of set only.
func setThreadsAffinity(set *unix.CPUSet) error {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("the threads of this process: %w", err)
	}
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: the thread ended
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// nthCPU returns the k-th core (from 0) of set, which holds more than k.
func nthCPU(set *unix.CPUSet, k int) int {
	for cpu := 0; ; cpu++ {
		if set.IsSet(cpu) {
			if k == 0 {
				return cpu
			}
			k--
		}
	}
}
