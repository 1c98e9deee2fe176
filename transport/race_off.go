//go:build !race

package transport

// raceDetector reports whether the race detector is on (see Send's memory model).
const raceDetector = false
