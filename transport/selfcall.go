package transport

import (
	"net"
	"net/netip"
	"sync"
)

// A process that calls a service of its own (a handler calling another
// provider method of the same process over TCP) reads the nested request
// with the budget the outer one holds: when the budget is reserved for a
// waiting frame, that frame may wait for the outer request's memory, and
// the outer request for its nested one. So a frame on a Server's
// connection whose peer is a connection this process made (Dial,
// NewConn) passes a reservation when it fits, as if there were none; it
// is still charged, and waits when the budget has no room. The peer is
// known by the connection's two TCP ends: a client connection of this
// process has them swapped.

// connEnds are a TCP connection's local and remote ends.
type connEnds struct{ local, remote netip.AddrPort }

// ownEnds holds the ends of the TCP connections this process made that
// are open.
var ownEnds sync.Map // connEnds -> struct{}

// endsOf returns nc's ends, if it is over TCP.
func endsOf(nc net.Conn) (connEnds, bool) {
	l, ok1 := nc.LocalAddr().(*net.TCPAddr)
	r, ok2 := nc.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return connEnds{}, false
	}
	return connEnds{unmapped(l.AddrPort()), unmapped(r.AddrPort())}, true
}

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// ownConn records c, a connection this process made, until it closes
// (forgetOwn).
func (c *Conn) ownConn() {
	if e, ok := endsOf(c.nc); ok {
		ownEnds.Store(e, struct{}{})
		c.own, c.ends = true, e
	}
}

// forgetOwn takes c off ownEnds once it is closed.
func (c *Conn) forgetOwn() {
	if c.own {
		ownEnds.Delete(c.ends)
	}
}

// fromSelf reports whether c, a Server's connection, has a connection of
// this process as its peer. It is asked only when a frame would wait for
// a reservation (the peer had made its connection, and written to it, by
// then), and the answer is kept.
func (c *Conn) fromSelf() bool {
	switch c.self.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	self := false
	if e, ok := endsOf(c.nc); ok {
		_, self = ownEnds.Load(connEnds{e.remote, e.local})
	}
	if self {
		c.self.Store(2)
	} else {
		c.self.Store(1)
	}
	return self
}
