package orwl

import (
	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/handle"
)

// Handle is one task's access path to one location: Acquire, Map, Release, Section,
// Resize, Test, Request and Close (documented in package handle). Inserts and requests
// return it; a program needs no other package to name it.
type Handle = handle.Handle

// Mode says whether a handle reads (shared access, adjacent reads granted together) or
// writes (exclusive access).
type Mode = fifo.Mode

// The two access modes.
const (
	Read  = fifo.Read
	Write = fifo.Write
)

// Errors of handle misuse, matched with errors.Is; every error a Handle returns names the
// task, the location and the FIFO position.
var (
	ErrNotRequested = handle.ErrNotRequested
	ErrHeld         = handle.ErrHeld
	ErrNotHeld      = handle.ErrNotHeld
	ErrClosed       = handle.ErrClosed
	ErrReadOnly     = handle.ErrReadOnly
	ErrNegativeSize = handle.ErrNegativeSize
	ErrRequested    = handle.ErrRequested
)
