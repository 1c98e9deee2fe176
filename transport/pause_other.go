//go:build !amd64

package transport

// spinPause is amd64's spin-wait hint; elsewhere a look follows the last at once.
func spinPause() {}
