//go:build unix && !linux

package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the process in its own process group, so that a terminal's
// Ctrl-C reaches it once (forwarded by the launcher) rather than twice.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
