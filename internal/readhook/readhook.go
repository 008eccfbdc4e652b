// Package readhook holds a hook in transport's counting reader for the
// tests of transport and of the packages over it (exchange): a test can
// hold a reader after its read(2) took bytes from the socket and before
// it counts them, as a reader the system did not run for a while is.
package readhook

import (
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
