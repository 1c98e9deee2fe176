package main

// gpuRow is one line of the gpu table: a measurement and its ratio to the row it is compared with.
type gpuRow struct {
	Figure  string  `json:"figure"` // summa, hybrid, procs or cholesky
	Impl    string  `json:"impl"`
	N       int     `json:"n"`
	Seconds float64 `json:"seconds"`
	GFlops  float64 `json:"gflops"`
	Ref     string  `json:"ref,omitempty"`   // Impl of the reference row
	Ratio   float64 `json:"ratio,omitempty"` // GFLOP/s over the reference's
	Note    string  `json:"note,omitempty"`
}
