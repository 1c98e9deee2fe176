// Package fluid is the engine of examples/sph: a smoothed particle hydrodynamics
// simulation (3-D, weakly compressible, an isothermal gas in the unit box with reflecting
// walls) and its sequential reference.
//
// The package does the computation of one job; it does not parse flags or print anything.
package fluid
