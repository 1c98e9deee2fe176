//go:build amd64 && !race

package release

import (
	"sync/atomic"
	"unsafe"
)

// Uint32 stores v into p with release ordering.
func Uint32(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }

// Uint64 stores v into p with release ordering.
func Uint64(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// Bool stores v into p with release ordering.
func Bool(p *atomic.Bool, v bool) { *(*uint32)(unsafe.Pointer(p)) = b32(v) }

// b32 is the word of an atomic.Bool that holds v.
func b32(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}
