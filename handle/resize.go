package handle

import (
	"fmt"

	"github.com/orwl-go/orwl/fifo"
)

// Resize changes the size of the location's data while h holds a write grant, keeping the
// common prefix and zero-filling the rest, and returns the new data (Map returns it too).
// Slices of the data from before, Section's included, are no longer valid.
func (h *Handle) Resize(n int) ([]byte, error) {
	switch {
	case h.held == nil:
		return nil, h.fail("resize", ErrNotHeld)
	case h.spec.Mode != fifo.Write:
		return nil, h.fail("resize", ErrReadOnly)
	case n < 0:
		return nil, h.fail("resize", fmt.Errorf("%w %d", ErrNegativeSize, n))
	}
	b, err := h.held.Resize(n)
	if err != nil {
		return nil, h.fail("resize", err)
	}
	return b, nil
}
