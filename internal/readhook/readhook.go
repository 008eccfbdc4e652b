// Package readhook holds a hook in transport's counting reader for the
// tests of transport and of the packages over it (exchange): a test can
// hold a reader after its read(2) took bytes from the socket and before
// it counts them, as a reader the system did not run for a while is.
package readhook

import (
	"net"
	"sync"
	"sync/atomic"
)

// Taken, when set (by tests only), runs in a counted read of a
// connection this process made (transport's rawReader, on Linux: plain
// TCP, and under TLS for Dial's connections) that took bytes from the
// socket, before they are counted.
var Taken atomic.Pointer[func()]

// Hold makes the first such read after which when reports true (nil:
// the first) wait there until release is called; held is closed once it
// waits. when runs in the reader, after the read(2). undo takes the hook
// away and releases the read (for the test's cleanup).
func Hold(when func() bool) (held <-chan struct{}, release, undo func()) {
	h, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var first atomic.Bool
	release = func() { once.Do(func() { close(gate) }) }
	f := func() {
		if first.Load() || when != nil && !when() {
			return
		}
		if first.CompareAndSwap(false, true) {
			close(h)
			<-gate
		}
	}
	Taken.Store(&f)
	undo = func() {
		Taken.Store(nil)
		release()
	}
	return h, release, undo
}

// Conn is a TCP connection under a reader a test makes itself (its own
// tls.Conn, say): once Hold armed it, its first read that takes bytes
// from the socket and after which when reports true waits there until
// release, as a reader the system did not run for a while would.
type Conn struct {
	*net.TCPConn
	when  atomic.Pointer[func() bool]
	held  chan struct{}
	gate  chan struct{}
	armed atomic.Bool
}

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if w := c.when.Load(); n > 0 && c.armed.Load() && w != nil && (*w)() && c.armed.CompareAndSwap(true, false) {
		close(c.held)
		<-c.gate
	}
	return n, err
}

// Hold arms c, once: held is closed when a read waits, and release lets
// it go on. Call it before the read it is for can begin.
func (c *Conn) Hold(when func() bool) (held <-chan struct{}, release func()) {
	c.held, c.gate = make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.armed.Store(true)
	c.when.Store(&when)
	return c.held, func() { once.Do(func() { close(c.gate) }) }
}
