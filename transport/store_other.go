//go:build !amd64

package transport

import "sync/atomic"

// storePlain stores v at p. Other architectures than amd64 store it atomically: their
// atomic store is a release already, not a full barrier.
func storePlain(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
