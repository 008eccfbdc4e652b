//go:build linux

package chaos_test

import (
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy is a TCP proxy on loopback in front of one provider. It
// passes bytes through, delays every chunk by a set time (in order, both
// ways), or drops: closes every connection and refuses new ones.
type faultProxy struct {
	ln     net.Listener
	target string
	quit   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	delay  time.Duration
	drop   bool
	closed bool
	conns  map[net.Conn]struct{}
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fault proxy: %v", err)
	}
	p := &faultProxy{ln: ln, target: target, quit: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every chunk read from now on by d (0: none).
func (p *faultProxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetDrop, when on, closes every connection and refuses new ones.
func (p *faultProxy) SetDrop(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = on
	if on {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *faultProxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// track adds c to the open connections, or closes it and reports false
// when the proxy drops or is closed.
func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop || p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *faultProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *faultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *faultProxy) serve(c net.Conn) {
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, c) })
	p.pipe(c, up)
	wg.Wait()
}

// pipe copies src to dst, each chunk held back by the delay in force
// when it was read, in order. It closes both ends when either fails.
func (p *faultProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	ch := make(chan chunk, 64)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer src.Close()
		defer dst.Close()
		for ck := range ch {
			if d := time.Until(ck.due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-p.quit:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(ck.b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ck := chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.currentDelay())}
			select {
			case ch <- ck:
			case <-writerDone:
				return
			}
		}
		if err != nil {
			break
		}
	}
	close(ch)
	<-writerDone
}

// Close closes every connection and the listener and waits for the
// proxy's goroutines.
func (p *faultProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.quit)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
