package zookeeper

import (
	"net"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// The session handshake's read deadline, which go-zookeeper sets ten
// receive timeouts ahead, is cut to the limit; once go-zookeeper clears
// it, the deadlines of the session's reads are left as they are set.
func TestHandshakeDeadlineCut(t *testing.T) {
	const limit = 2 * time.Second
	inner := &deadlineConn{}
	c := &handshakeConn{Conn: inner, limit: limit}
	before := time.Now()
	far := before.Add(20 * limit)
	if err := c.SetReadDeadline(far); err != nil {
		t.Fatal(err)
	}
	if got := inner.set[0]; got.After(time.Now().Add(limit)) || got.Before(before.Add(limit)) {
		t.Fatalf("handshake deadline %v after the call, want %v", got.Sub(before), limit)
	}
	// A deadline already sooner than the limit is kept.
	soon := time.Now().Add(limit / 2)
	_ = c.SetReadDeadline(soon)
	if got := inner.set[1]; !got.Equal(soon) {
		t.Fatalf("sooner deadline changed to %v, want %v", got, soon)
	}
	_ = c.SetReadDeadline(time.Time{}) // the handshake's answer arrived
	_ = c.SetReadDeadline(far)
	if got := inner.set[3]; !got.Equal(far) {
		t.Fatalf("a session read's deadline was cut to %v, want %v", got, far)
	}
}

// A server that accepts a connection and never answers the handshake is
// given up on at the limit: the read fails with a timeout instead of
// waiting for the deadline go-zookeeper asked for.
func TestHandshakeSilentServerGivenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := handshakeDialer(50*time.Millisecond, nil, nil)("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 4))
		read <- err
	}()
	select {
	case err := <-read:
		var ne net.Error
		if ne, _ = err.(net.Error); ne == nil || !ne.Timeout() {
			t.Fatalf("read: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handshake's read still waits: its deadline was not cut")
	}
}
