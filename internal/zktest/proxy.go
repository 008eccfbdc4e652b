package zktest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on a loopback port in front of one server. Block
// cuts every connection through it and refuses new ones until Unblock, so
// a client is partitioned from ZooKeeper while the server keeps running:
// held longer than the session timeout, the server expires the client's
// session (a real, server-side expiry).
type Proxy struct {
	// Addr is the proxy's listen address, 127.0.0.1:port.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewProxy starts a proxy to target; t.Cleanup closes it.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.drop(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.blocked || p.closed {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.drop(up)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(up, c)
		up.Close()
		c.Close()
	})
	_, _ = io.Copy(c, up)
	up.Close()
	c.Close()
	wg.Wait()
}

func (p *Proxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Block closes every connection through the proxy and refuses new ones.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.conns {
		c.Close()
	}
}

// Unblock lets connections through again.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
