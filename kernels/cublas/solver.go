package cublas

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// solverMajors are the libcusolver major versions asked of the dynamic loader by
// soname when no file is found in the searched directories, newest first: CUDA 13
// ships libcusolver.so.12, CUDA 12 libcusolver.so.11.
var solverMajors = []string{"12", "11"}

// solver holds the cuSOLVER dense entry points that Dpotrf and Dtrtri use. It is loaded on
// the first call that needs it (loadSolver), so that Dgemm users never need libcusolver.
type solver struct {
	path string

	create          func(h *uintptr) int32
	destroy         func(h uintptr) int32
	setStream       func(h, s uintptr) int32
	potrfBufferSize func(h uintptr, uplo, n int32, a uintptr, lda int32, lwork *int32) int32
	potrf           func(h uintptr, uplo, n int32, a uintptr, lda int32, work uintptr, lwork int32, info uintptr) int32
	trtriBufferSize func(h uintptr, uplo, diag int32, n int64, dataType int32, a uintptr, lda int64, devBytes, hostBytes *uint64) int32
	trtri           func(h uintptr, uplo, diag int32, n int64, dataType int32, a uintptr, lda int64, devBuf uintptr, devBytes uint64, hostBuf unsafe.Pointer, hostBytes uint64, info uintptr) int32
}

// cudaR64F is cudaDataType's CUDA_R_64F (double).
const cudaR64F = 1

var (
	solverOnce sync.Once
	solverLib  *solver
	solverErr  error
)

// loadSolver opens libcusolver once per process, after Load: in the directory libcublas
// was loaded from, then in the directories Load searched (its arguments, ORWL_CUDA_LIB,
// LD_LIBRARY_PATH, /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib), in
// each the newest major version of the libcusolver.so.* files first, and finally by
// soname (libcusolver.so.12, then .11) in the dynamic loader's default search. The error
// lists every path tried.
func loadSolver() (*solver, error) {
	solverOnce.Do(func() {
		if err := Load(); err != nil {
			solverErr = err
			return
		}
		var dirs []string
		if filepath.IsAbs(lib.cublasPath) {
			dirs = append(dirs, filepath.Dir(lib.cublasPath))
		}
		solverLib, solverErr = openSolver(append(dirs, lib.dirs...))
	})
	return solverLib, solverErr
}

// SolverLibrary returns the path libcusolver was loaded from, loading it if needed (see
// Kernel.Dpotrf), or the error saying why it could not be.
func SolverLibrary() (string, error) {
	s, err := loadSolver()
	if err != nil {
		return "", err
	}
	return s.path, nil
}

// solverCandidates returns the libcusolver files in dirs, directory by directory and in
// each the newest major version first (its shortest name, the soname link, preferred),
// then the bare sonames of solverMajors; and the glob patterns that matched nothing. A
// directory listed twice is searched once.
func solverCandidates(dirs []string) (paths, empty []string) {
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		pattern := filepath.Join(dir, "libcusolver.so.*")
		matches, _ := filepath.Glob(pattern)
		type candidate struct {
			major int
			path  string
		}
		var cs []candidate
		for _, m := range matches {
			version := strings.TrimPrefix(filepath.Base(m), "libcusolver.so.")
			major, err := strconv.Atoi(strings.Split(version, ".")[0])
			if err == nil {
				cs = append(cs, candidate{major, m})
			}
		}
		if len(cs) == 0 {
			empty = append(empty, pattern)
			continue
		}
		slices.SortFunc(cs, func(a, b candidate) int {
			return cmp.Or(cmp.Compare(b.major, a.major), cmp.Compare(len(a.path), len(b.path)))
		})
		done := map[int]bool{}
		for _, c := range cs {
			if !done[c.major] && !seen[c.path] {
				done[c.major], seen[c.path] = true, true
				paths = append(paths, c.path)
			}
		}
	}
	for _, major := range solverMajors {
		paths = append(paths, "libcusolver.so."+major)
	}
	return paths, empty
}

// openSolver opens the first libcusolver of solverCandidates(dirs) that loads and has
// every symbol the kernel binds.
func openSolver(dirs []string) (*solver, error) {
	paths, tried := solverCandidates(dirs)
	for _, path := range paths {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", path, err))
			continue
		}
		s := &solver{path: path}
		if err := s.resolve(h); err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", path, err))
			continue
		}
		return s, nil
	}
	return nil, fmt.Errorf("cublas: libcusolver not found (Dpotrf and Dtrtri need it; set %s to its directory); tried: %s",
		EnvLib, strings.Join(tried, ", "))
}

// resolve binds every symbol; a missing one is an error naming it.
func (s *solver) resolve(h uintptr) error {
	syms := []struct {
		name string
		fn   any
	}{
		{"cusolverDnCreate", &s.create},
		{"cusolverDnDestroy", &s.destroy},
		{"cusolverDnSetStream", &s.setStream},
		{"cusolverDnDpotrf_bufferSize", &s.potrfBufferSize},
		{"cusolverDnDpotrf", &s.potrf},
		{"cusolverDnXtrtri_bufferSize", &s.trtriBufferSize},
		{"cusolverDnXtrtri", &s.trtri},
	}
	for _, sym := range syms {
		p, err := purego.Dlsym(h, sym.name)
		if err != nil {
			return fmt.Errorf("symbol %s missing: %w", sym.name, err)
		}
		purego.RegisterFunc(sym.fn, p)
	}
	return nil
}

// SolverStatus is a cuSOLVER status (cusolverStatus_t) other than
// CUSOLVER_STATUS_SUCCESS.
type SolverStatus int32

// solverStatusNames are the names of the cusolverStatus_t values.
var solverStatusNames = []string{
	1: "CUSOLVER_STATUS_NOT_INITIALIZED",
	2: "CUSOLVER_STATUS_ALLOC_FAILED",
	3: "CUSOLVER_STATUS_INVALID_VALUE",
	4: "CUSOLVER_STATUS_ARCH_MISMATCH",
	5: "CUSOLVER_STATUS_MAPPING_ERROR",
	6: "CUSOLVER_STATUS_EXECUTION_FAILED",
	7: "CUSOLVER_STATUS_INTERNAL_ERROR",
	8: "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED",
	9: "CUSOLVER_STATUS_NOT_SUPPORTED",
}

// Error returns "cusolver: <CUSOLVER_STATUS_NAME> (<code>)".
func (s SolverStatus) Error() string {
	if s > 0 && int(s) < len(solverStatusNames) {
		return fmt.Sprintf("cusolver: %s (%d)", solverStatusNames[s], int32(s))
	}
	return fmt.Sprintf("cusolver: status %d", int32(s))
}

// solverStatus converts a cusolverStatus_t to nil or a SolverStatus.
func solverStatus(code int32) error { return failure[SolverStatus](code) }
