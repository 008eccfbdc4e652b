package zktest

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// waitStopped sees a running group as running, and a stopped one as
// stopped once every thread has stopped.
func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	pid := cmd.Process.Pid
	if groupStopped(pid) {
		t.Fatal("a running sleep is reported stopped")
	}
	if waitStopped(pid, 50*time.Millisecond) {
		t.Fatal("waitStopped on a running group returned true")
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !waitStopped(pid, 10*time.Second) {
		t.Fatal("a stopped sleep is not reported stopped within 10 s")
	}
	if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !waitRunning(t, pid) {
		t.Fatal("a continued sleep is still reported stopped")
	}
}

// waitRunning waits (at most 10 s) until group pid is no longer stopped.
func waitRunning(t *testing.T, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for groupStopped(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
