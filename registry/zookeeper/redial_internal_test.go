package zookeeper

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestRedialClosesOldSockets: when the watchdog gives up on a zk.Conn
// whose server accepts connections but grants no session, it closes that
// Conn's sockets, and refuses it new ones, before closing the Conn, so
// that no handshake of the old Conn can complete afterwards and send
// zk.Conn.Close's close request on a live session while go-zookeeper
// re-sends its watches (a data race inside the library on its last zxid,
// seen under -race in TestUnregisterDuringOutage). Here the server is a
// listener that accepts and never answers: before, the old Conn's socket
// stayed open, mid-handshake, until the handshake's own limit (20 s with
// this session timeout); now the peer sees it closed at the re-dial.
func TestRedialClosesOldSockets(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // half the handshake limit
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var held []net.Conn
	defer func() {
		_ = l.Close()
		<-done
		close(accepted)
		for c := range accepted {
			held = append(held, c)
		}
		for _, c := range held {
			_ = c.Close()
		}
	}()

	r, err := New("zookeeper://"+l.Addr().String(), Options{
		Application:     "test",
		SessionTimeout:  30 * time.Second, // handshake limit 20 s
		WatchdogTimeout: 100 * time.Millisecond,
		RegisterWait:    time.Second,
		NoCacheFile:     true,
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.mu.Lock()
	first := r.socks
	r.mu.Unlock()

	var c net.Conn
	select {
	case c = <-accepted: // the first Conn's socket, mid-handshake
		held = append(held, c)
	case <-ctx.Done():
		t.Fatal("the registry did not connect")
	}
	// The watchdog re-dials (its WatchdogTimeout after the connect) and
	// closes the old Conn's socket: the peer reads its end.
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the old Conn's socket still open after %d re-dials", r.redials.Load())
			}
			break // EOF or reset: closed
		}
	}
	if r.redials.Load() == 0 {
		t.Fatal("the socket closed without a re-dial")
	}
	first.mu.Lock()
	closed, open := first.closed, len(first.open)
	first.mu.Unlock()
	if !closed || open != 0 {
		t.Fatalf("old Conn's sockets: closed=%v, %d open; want closed, none open", closed, open)
	}
	if first.add(&handshakeConn{}) {
		t.Fatal("the old Conn's sockets took a new connection")
	}
}
