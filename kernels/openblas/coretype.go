package openblas

import (
	"os"
	"slices"
	"strings"
)

// envCoreType is OpenBLAS's own variable that forces its kernels for one CPU family.
const envCoreType = "OPENBLAS_CORETYPE"

// chooseCoreType sets OPENBLAS_CORETYPE from the CPU's features when it is not set, before
// the library is loaded: OpenBLAS builds do not recognise some recent CPUs (or CPUs behind
// a hypervisor's generic model name) and then fall back to their SSE3 kernels, several
// times slower. Processes started afterwards inherit the choice, so C programs compared
// with this plugin run the same kernels. A value set by the user is kept.
func chooseCoreType() {
	if _, ok := os.LookupEnv(envCoreType); ok {
		return
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return
	}
	var flags []string
	for line := range strings.Lines(string(info)) {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(val)
			break
		}
	}
	switch {
	case slices.Contains(flags, "avx512f") && slices.Contains(flags, "avx512dq"):
		os.Setenv(envCoreType, "SkylakeX")
	case slices.Contains(flags, "avx2") && slices.Contains(flags, "fma"):
		os.Setenv(envCoreType, "Haswell")
	}
}
