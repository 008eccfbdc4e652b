package zktest

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// Windows has no SIGSTOP nor SIGCONT: these values only tell Pause and
// Resume apart from the signals signalGroup can deliver, and it refuses
// them.
const sigStop, sigCont = syscall.Signal(-19), syscall.Signal(-18)

// sysProcAttr: Windows has no process groups to put the server in.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// signalGroup ends the process pid for SIGKILL and SIGTERM (Windows can
// only terminate a process, and not its children); other signals (Pause,
// Resume) are not supported.
func signalGroup(pid int, sig syscall.Signal) error {
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return fmt.Errorf("zktest: signal %v not supported on Windows", sig)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// processCPU is not known here.
func processCPU(int) (time.Duration, bool) { return 0, false }

// waitStopped: servers are not paused on Windows.
func waitStopped(int, time.Duration) bool { return true }
