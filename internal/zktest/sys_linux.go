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

// waitStopped waits, at most limit, until every thread of every process in
// process group pgid is stopped, and says whether they were. kill(SIGSTOP)
// returns before that: one thread of each process takes the signal when it
// next runs and then stops the others, and on a loaded machine a thread of
// the server can answer a request in between.
func waitStopped(pgid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if groupStopped(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond) // polling /proc: there is no event for a stop
	}
}

// groupStopped says whether every thread of every process in group pgid
// is stopped (state T or t) or gone.
func groupStopped(pgid int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: do not wait
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		state, group, ok := statOf("/proc/" + p.Name() + "/stat")
		if !ok || group != pgid || state == 'Z' || state == 'X' {
			continue
		}
		tasks, err := os.ReadDir("/proc/" + p.Name() + "/task")
		if err != nil {
			continue // gone meanwhile
		}
		for _, task := range tasks {
			st, _, ok := statOf("/proc/" + p.Name() + "/task/" + task.Name() + "/stat")
			if ok && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				return false
			}
		}
	}
	return true
}

// statOf returns the state and the process group from a /proc stat file.
func statOf(path string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After the command: state, ppid, pgrp.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], g, true
}
