package zktest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group (so a zkServer.sh
// and its java die together) and kills it if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processCPU returns the user and system CPU time process pid has used
// (from /proc/pid/stat, in clock ticks of 10 ms).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command, which is in parentheses: state is
	// the first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+k) * 10 * time.Millisecond, true
}
