//go:build !linux

package external

import (
	"context"
	"errors"
	"fmt"
)

// errPlatform says why Run cannot work here: it passes memory-backed files (memfd), which
// only Linux has.
var errPlatform = fmt.Errorf("external: running programs on memory-backed files needs Linux (memfd): %w", errors.ErrUnsupported)

// run is never reached: check returns errPlatform first.
func (c *Cmd) run(context.Context) error { return errPlatform }
