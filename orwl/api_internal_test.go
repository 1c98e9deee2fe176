package orwl

import (
	"testing"

	"github.com/orwl-go/orwl/fifo"
)

// TestModeValues: Mode's values are the FIFO's, so that converting one to the other (fifo,
// modeOf) is free.
func TestModeValues(t *testing.T) {
	for _, m := range []struct {
		ours Mode
		fifo fifo.Mode
	}{{Read, fifo.Read}, {Write, fifo.Write}} {
		if m.ours.fifo() != m.fifo || modeOf(m.fifo) != m.ours {
			t.Errorf("mode %s is %d, the FIFO's %d", m.ours, m.ours, m.fifo)
		}
	}
}
