package kernels_test

import (
	"fmt"

	"gonum.org/v1/gonum/blas"

	"github.com/orwl-go/orwl/kernels"
	_ "github.com/orwl-go/orwl/kernels/all" // registers gonum, openblas, cublas
)

// A program picks its kernel by name at run time (from a flag or a
// configuration file), here gonum; kernels.Auto would pick the fastest
// available one, and kernels.Available lists them.
func Example() {
	g, err := kernels.Get("gonum")
	if err != nil {
		fmt.Println(err)
		return
	}
	a := []float64{1, 2, 3, 4} // 2×2, row-major
	b := []float64{5, 6, 7, 8}
	c := make([]float64, 4)
	g.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2)
	fmt.Println(g.Name(), g.Device(), c)

	_, err = kernels.Get("nosuch")
	fmt.Println(err != nil)
	// Output:
	// gonum cpu [19 22 43 50]
	// true
}
