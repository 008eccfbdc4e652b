//go:build unix && !linux

package zktest

import (
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group, so a zkServer.sh
// and its java die together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// processCPU is not known here.
func processCPU(int) (time.Duration, bool) { return 0, false }

// waitStopped cannot tell here; kill(SIGSTOP) is taken as done.
func waitStopped(int, time.Duration) bool { return true }
