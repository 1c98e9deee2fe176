// Package handle implements ORWL handles: the objects through which a task requests,
// acquires, maps and releases one location.
//
// A handle places its request in the location's FIFO (Request), blocks until it is granted
// (Acquire), sees the data meanwhile (Map), and releases it (Release), which grants the next
// entry; Section does all of that around a function. An iterative handle (ORWL's handle2)
// requests its next iteration, in the same mode, when it is acquired, so every location
// cycles through its handles in the same order iteration after iteration. A handle talks to
// its location through a Queue, a local FIFO or a proxy of another process's, whose tickets
// each carry a Latch, on which Acquire waits. This package knows nothing of scheduling, of
// the network, or of how data is stored.
package handle
