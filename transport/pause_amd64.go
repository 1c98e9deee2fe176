package transport

// spinPause tells the core that it spins on a load (the PAUSE instruction): it waits a few
// dozen cycles, leaving the polled cache line to the writer that wants it, and spares the
// pipeline's flush when the awaited store lands.
func spinPause()
