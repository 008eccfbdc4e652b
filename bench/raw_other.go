//go:build (!benchone || bench_raw) && !linux

package main

import (
	"io"
	"net"
)

// rawIO is nc itself off Linux (see raw_linux.go).
func rawIO(nc net.Conn) io.ReadWriter { return nc }
