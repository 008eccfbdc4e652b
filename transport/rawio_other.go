//go:build !linux

package transport

import (
	"io"
	"net"
)

// newReader returns what the read loop reads nc with.
func newReader(nc net.Conn) io.Reader { return nc }

// waitHook: writeBuffers does not call directWrite.beforeWait.
const waitHook = false

// socketUnread returns 0: the bytes waiting in a socket cannot be told
// here (see the Linux one).
func socketUnread(net.Conn) int { return 0 }

// writeBuffers writes all of bufs (consuming them).
func writeBuffers(_ *directWrite, nc net.Conn, bufs *net.Buffers) error {
	_, err := bufs.WriteTo(nc)
	return err
}
