package transport

import (
	"crypto/tls"
	"errors"
	"io"
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
func (c *countingConn) SyscallConn() (syscall.RawConn, error) { return syscallConnOf(c.Conn) }

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

// readUnder is the TCP connection under a TLS connection Dial made, where
// the reader that takes bytes from the socket can count them (a rawReader,
// Linux): tls.Conn reads it through that reader, so bytes tls.Conn has
// taken from the socket but not decrypted or handed on yet are counted as
// they leave the socket (Reading's Came), with the same "read under way"
// bit, set only around the non-blocking read(2) itself: a reader waiting
// in the poller for bytes is not taking any.
type readUnder struct {
	net.Conn
	rd io.Reader
}

func (c *readUnder) Read(p []byte) (int, error) { return c.rd.Read(p) }

// SyscallConn is the TCP connection's (socketUnread reads it).
func (c *readUnder) SyscallConn() (syscall.RawConn, error) { return syscallConnOf(c.Conn) }

// underTLS returns what a TLS client connection over nc reads: nc read
// with a counting reader (readUnder) where there is one (newReader gives
// other than nc), else nc.
func underTLS(nc net.Conn) net.Conn {
	if rd := newReader(nc); rd != io.Reader(nc) {
		return &readUnder{Conn: nc, rd: rd}
	}
	return nc
}

// readerUnder returns the reader under nc when nc is a TLS connection
// over a readUnder, else nil.
func readerUnder(nc io.Reader) io.Reader {
	if tc, ok := nc.(*tls.Conn); ok {
		if u, ok := tc.NetConn().(*readUnder); ok {
			return u.rd
		}
	}
	return nil
}

// syscallConnOf is the raw connection of nc, the connection a wrapper
// (countingConn, readUnder, prefixConn) holds, so that socketUnread and
// the raw reader reach the socket through the wrapper.
func syscallConnOf(nc net.Conn) (syscall.RawConn, error) {
	if sc, ok := nc.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
