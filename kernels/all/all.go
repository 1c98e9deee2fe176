// Package all registers every kernel plugin (gonum, openblas, cublas) with
// the kernels registry. Import it for its side effect:
//
//	import _ "github.com/orwl-go/orwl/kernels/all"
//
// Registering costs nothing at start-up: libraries are opened only when a
// plugin is first checked (kernels.Get, kernels.Available). This package must
// contain nothing but the imports.
package all

import (
	_ "github.com/orwl-go/orwl/kernels/cublas"   // "cublas"
	_ "github.com/orwl-go/orwl/kernels/gonum"    // "gonum"
	_ "github.com/orwl-go/orwl/kernels/openblas" // "openblas"
)
