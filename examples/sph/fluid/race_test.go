//go:build race

package fluid

// raceEnabled: the race detector slows the kernels tenfold.
const raceEnabled = true
