//go:build !linux

package orwl

// bindToCore binds nothing outside Linux.
func bindToCore(rank, local int) (int, error) { return -1, nil }
