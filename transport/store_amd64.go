package transport

// storePlain stores v at p with a plain store, which on amd64 is ordered after the stores
// before it, as a release: what the writer copied into a record is visible before its
// header. It is not a full barrier (an atomic store on amd64 waits until the core owns
// every line it wrote, the cache line the reader polls included), so the reader of an
// unfenced ring must make one before it sleeps (memoryBarrier). It is written in assembly
// so that the race detector, which sees one process, does not take the other process's
// reads of the ring for a race.
//
//go:noescape
func storePlain(p *uint64, v uint64)
