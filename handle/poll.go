package handle

// Test reports, without waiting for the FIFO to move, whether h's request is granted, so
// that Acquire would return at once. It sees every grant decided before the caller's last
// synchronisation with the location's FIFO (its own acquire or release of a handle on it,
// or a release by another task that happens before), in this process or another.
func (h *Handle) Test() bool {
	return !h.closed && h.held == nil && h.next != nil && h.next.Granted()
}
