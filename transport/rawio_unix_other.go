//go:build unix && !linux

package transport

import "syscall"

// writeFD is the direct write's write(2).
func writeFD(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
