//go:build !linux

package transport

import (
	"io"
	"net"
	"sync/atomic"
)

// newReader returns what the read loop reads nc with.
func newReader(nc net.Conn) io.Reader { return nc }

// countReads reports false: reads are counted as the frames take them
// (Conn.arrived), not as they leave the socket (see the Linux one).
func countReads(io.Reader, *atomic.Int64) bool { return false }

// waitHook: writeBuffers does not call directWrite.beforeWait.
const waitHook = false

// socketUnread returns 0: the bytes waiting in a socket cannot be told
// here (see the Linux one).
func socketUnread(net.Conn) int { return 0 }

// socketReceived reports false: the bytes a socket received cannot be
// told here (see the Linux one).
func socketReceived(net.Conn) (int64, bool) { return 0, false }

// writeBuffers writes all of bufs (consuming them).
func writeBuffers(_ *directWrite, nc net.Conn, bufs *net.Buffers) error {
	_, err := bufs.WriteTo(nc)
	return err
}
