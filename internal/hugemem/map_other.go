//go:build !linux

package hugemem

import (
	"os"
	"unsafe"
)

// mapHuge maps nothing here: transparent huge pages are Linux's, so every buffer comes
// from the Go heap.
func mapHuge(uintptr, string) (unsafe.Pointer, uintptr) { return nil, 0 }

// unmap is never called where mapHuge maps nothing.
func unmap(unsafe.Pointer, uintptr) {}

// fill is never called where mapHuge maps nothing.
func fill(unsafe.Pointer, uintptr) {}

// mapPages maps nothing here: every buffer comes from the Go heap.
func mapPages(uintptr) (unsafe.Pointer, uintptr) { return nil, 0 }

// protect is never called where nothing is mapped.
func protect(unsafe.Pointer, uintptr, Access) error { return nil }

// reserve is never called where nothing is mapped.
func reserve(unsafe.Pointer, uintptr) error { return nil }

// movePages moves nothing where nothing is mapped.
func movePages(unsafe.Pointer, unsafe.Pointer, uintptr) uintptr { return 0 }

// selfPID is this process's id.
var selfPID = os.Getpid()

// mapShared maps nothing here: AllocShared's buffers are Alloc's.
func mapShared(uintptr, string) (unsafe.Pointer, uintptr, int64) { return nil, 0, 0 }

// punch is never called where nothing is shared.
func punch(int64, uintptr) {}

// mapView maps nothing here.
func mapView(Share, bool) (unsafe.Pointer, uintptr, error) { return nil, 0, ErrNoView }

// remapShared is never called where nothing is shared.
func remapShared(unsafe.Pointer, uintptr, int64) bool { return false }
