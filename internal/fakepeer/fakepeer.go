// Package fakepeer holds what the tests of exchange and protocol/dubbo
// write again and again for a fake peer on real TCP: a listener on
// 127.0.0.1 (or another loopback address) that serves each connection on
// a goroutine of its own and is gone when the test ends, and a reader of
// one exchange frame.
package fakepeer

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/minidubbo/minidubbo/exchange"
)

// Listen listens on a free port of 127.0.0.1 and runs serve on a
// goroutine of its own for each connection it accepts (serve nil: the
// connections are only held open, never read). When the test ends,
// quit is closed, then the listener and every connection accepted, and
// the cleanup waits for the accepting goroutine and every serve to
// return. serve need not close nc. It returns the listener's address.
func Listen(t testing.TB, serve func(nc net.Conn, quit <-chan struct{})) *net.TCPAddr {
	t.Helper()
	return ListenOn(t, "127.0.0.1", serve)
}

// ListenOn is Listen on a free port of ip, a loopback address such as
// 127.0.0.2 (on Linux all of 127.0.0.0/8 is local): for tests whose
// peers must differ by address, not only by port.
func ListenOn(t testing.TB, ip string, serve func(nc net.Conn, quit <-chan struct{})) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("fakepeer: listen on %s: %v", ip, err)
	}
	quit := make(chan struct{})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	wg.Go(func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				nc.Close()
				return
			}
			conns = append(conns, nc)
			mu.Unlock()
			if serve != nil {
				wg.Go(func() { serve(nc, quit) })
			}
		}
	})
	t.Cleanup(func() {
		close(quit)
		l.Close()
		mu.Lock()
		closed = true
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr)
}

// ReadFrame reads one frame from r: its header, parsed, then its body.
func ReadFrame(r io.Reader) (exchange.Header, []byte, error) {
	h, err := readHeader(r)
	if err != nil {
		return exchange.Header{}, nil, err
	}
	body := make([]byte, h.Length)
	if _, err := io.ReadFull(r, body); err != nil {
		return exchange.Header{}, nil, err
	}
	return h, body, nil
}

// SkipFrame reads one frame from r and returns its header; the body is
// read and dropped, not kept.
func SkipFrame(r io.Reader) (exchange.Header, error) {
	h, err := readHeader(r)
	if err != nil {
		return exchange.Header{}, err
	}
	if _, err := io.CopyN(io.Discard, r, int64(h.Length)); err != nil {
		return exchange.Header{}, err
	}
	return h, nil
}

func readHeader(r io.Reader) (exchange.Header, error) {
	var hdr [exchange.HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return exchange.Header{}, err
	}
	return exchange.ParseHeader(hdr[:])
}
