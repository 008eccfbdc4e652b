package zktest

import "syscall"

// sysProcAttr puts the server in its own process group (so a zkServer.sh
// and its java die together) and kills it if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
