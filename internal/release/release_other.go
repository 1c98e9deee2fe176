//go:build !amd64 || race

package release

import "sync/atomic"

// Uint32 stores v into p with release ordering.
func Uint32(p *atomic.Uint32, v uint32) { p.Store(v) }

// Uint64 stores v into p with release ordering.
func Uint64(p *atomic.Uint64, v uint64) { p.Store(v) }

// Bool stores v into p with release ordering.
func Bool(p *atomic.Bool, v bool) { p.Store(v) }
