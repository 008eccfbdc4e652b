package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// countingConn is the TCP connection under a TLS server connection: it
// counts its writes that took bytes, so that the budget's reclaimer sees
// a slow reader take part of a batch (TLS writes a batch record by
// record), as directWrite.sent shows it for plain TCP, instead of only
// whole batches.
type countingConn struct {
	net.Conn
	sent atomic.Uint64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.sent.Add(1)
	}
	return n, err
}

// SyscallConn is the TCP connection's (socketUnread reads it).
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// writesUnder returns the count of writes under nc when nc is a TLS
// connection over a countingConn, else nil.
func writesUnder(nc net.Conn) *atomic.Uint64 {
	if tc, ok := nc.(*tls.Conn); ok {
		if cc, ok := tc.NetConn().(*countingConn); ok {
			return &cc.sent
		}
	}
	return nil
}
