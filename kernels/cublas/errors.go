package cublas

import "fmt"

// CUDAError is a CUDA runtime status (cudaError_t) other than cudaSuccess.
// Its Error method gives the runtime's own name and description.
type CUDAError int32

// Named CUDA runtime errors most likely to reach callers; any other code is
// still returned as a CUDAError.
const (
	ErrInvalidValue         CUDAError = 1   // cudaErrorInvalidValue
	ErrMemoryAllocation     CUDAError = 2   // cudaErrorMemoryAllocation: out of device or pinned memory
	ErrInitialization       CUDAError = 3   // cudaErrorInitializationError
	ErrInsufficientDriver   CUDAError = 35  // cudaErrorInsufficientDriver: driver older than the runtime
	ErrDevicesUnavailable   CUDAError = 46  // cudaErrorDevicesUnavailable: exclusive or prohibited mode
	ErrNoDevice             CUDAError = 100 // cudaErrorNoDevice
	ErrInvalidDevice        CUDAError = 101 // cudaErrorInvalidDevice
	ErrNotReady             CUDAError = 600 // cudaErrorNotReady: queued work not yet complete (not a failure)
	ErrIllegalAddress       CUDAError = 700 // cudaErrorIllegalAddress
	ErrHostAlreadyPinned    CUDAError = 712 // cudaErrorHostMemoryAlreadyRegistered
	ErrHostNotPinned        CUDAError = 713 // cudaErrorHostMemoryNotRegistered
	ErrLaunchFailure        CUDAError = 719 // cudaErrorLaunchFailure
	ErrSystemDriverMismatch CUDAError = 803 // cudaErrorSystemDriverMismatch
	ErrCompatNotSupported   CUDAError = 804 // cudaErrorCompatNotSupportedOnDevice
)

// Error returns "cuda: <name> (<code>): <description>", with the name and
// description from the loaded runtime.
func (e CUDAError) Error() string {
	c := loaded.Load()
	if c == nil {
		return fmt.Sprintf("cuda: error %d", int32(e))
	}
	return fmt.Sprintf("cuda: %s (%d): %s", c.getErrorName(int32(e)), int32(e), c.getErrorString(int32(e)))
}

// Status is a cuBLAS status (cublasStatus_t) other than
// CUBLAS_STATUS_SUCCESS.
type Status int32

// cuBLAS status codes.
const (
	StatusNotInitialized  Status = 1  // CUBLAS_STATUS_NOT_INITIALIZED
	StatusAllocFailed     Status = 3  // CUBLAS_STATUS_ALLOC_FAILED
	StatusInvalidValue    Status = 7  // CUBLAS_STATUS_INVALID_VALUE
	StatusArchMismatch    Status = 8  // CUBLAS_STATUS_ARCH_MISMATCH
	StatusMappingError    Status = 11 // CUBLAS_STATUS_MAPPING_ERROR
	StatusExecutionFailed Status = 13 // CUBLAS_STATUS_EXECUTION_FAILED
	StatusInternalError   Status = 14 // CUBLAS_STATUS_INTERNAL_ERROR
	StatusNotSupported    Status = 15 // CUBLAS_STATUS_NOT_SUPPORTED
	StatusLicenseError    Status = 16 // CUBLAS_STATUS_LICENSE_ERROR
)

var statusNames = map[Status]string{
	StatusNotInitialized:  "CUBLAS_STATUS_NOT_INITIALIZED",
	StatusAllocFailed:     "CUBLAS_STATUS_ALLOC_FAILED",
	StatusInvalidValue:    "CUBLAS_STATUS_INVALID_VALUE",
	StatusArchMismatch:    "CUBLAS_STATUS_ARCH_MISMATCH",
	StatusMappingError:    "CUBLAS_STATUS_MAPPING_ERROR",
	StatusExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED",
	StatusInternalError:   "CUBLAS_STATUS_INTERNAL_ERROR",
	StatusNotSupported:    "CUBLAS_STATUS_NOT_SUPPORTED",
	StatusLicenseError:    "CUBLAS_STATUS_LICENSE_ERROR",
}

// Error returns "cublas: <CUBLAS_STATUS_NAME> (<code>)".
func (s Status) Error() string {
	if name, ok := statusNames[s]; ok {
		return fmt.Sprintf("cublas: %s (%d)", name, int32(s))
	}
	return fmt.Sprintf("cublas: status %d", int32(s))
}

// check converts a cudaError_t to nil or a CUDAError.
func (c *cuda) check(code int32) error { return failure[CUDAError](code) }

// status converts a cublasStatus_t to nil or a Status.
func status(code int32) error { return failure[Status](code) }

// failure converts the status code of a CUDA library, where 0 is success, to nil or to the
// library's error type E.
func failure[E interface {
	~int32
	error
}](code int32) error {
	if code == 0 {
		return nil
	}
	return E(code)
}
