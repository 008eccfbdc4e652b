//go:build unix

package zktest

import "syscall"

// Signals Pause and Resume send.
const sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT

// signalGroup sends sig to the process group pid leads (see sysProcAttr).
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
