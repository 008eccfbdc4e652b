package transport

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selfEcho echoes frames and hands its connections to conns.
type selfEcho struct{ conns chan *Conn }

func (h selfEcho) Serve(c *Conn, f *Buffer) {
	select {
	case h.conns <- c:
	default:
	}
	_ = c.Send(f)
}
func (selfEcho) Closed(*Conn, error) {}

// sink drops the frames it is served.
type sink struct{}

func (sink) Serve(_ *Conn, f *Buffer) { f.Release() }
func (sink) Closed(*Conn, error)      {}

// TestFromSelfKnowsOwnConnections: a Server's connection from a
// connection this process made with Dial is from itself; one from a
// plain net.Dial (a stranger's, as far as the transport knows) is not.
// Once the Dial'ed connection is closed its ends are forgotten.
func TestFromSelfKnowsOwnConnections(t *testing.T) {
	h := selfEcho{conns: make(chan *Conn, 2)}
	s := NewServer(h, nil)
	l, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(l) }()
	defer func() { s.Close(); <-served }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	serverConn := func(send func(*Buffer) error) *Conn {
		t.Helper()
		f := GetBuffer()
		f.B = append(f.B, make([]byte, HeaderSize)...)
		binary.BigEndian.PutUint16(f.B, Magic)
		require.NoError(t, send(f))
		select {
		case c := <-h.conns:
			return c
		case <-ctx.Done():
			t.Fatal("no frame served")
			return nil
		}
	}
	own, err := Dial(ctx, l.Addr().String(), sink{}, nil)
	require.NoError(t, err)
	require.True(t, serverConn(own.Send).fromSelf(), "a connection made with Dial")
	ends := own.ends
	_, ok := ownEnds.Load(ends)
	require.True(t, ok)

	stranger, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer stranger.Close()
	require.False(t, serverConn(func(f *Buffer) error { _, err := stranger.Write(f.B); f.Release(); return err }).fromSelf(),
		"a connection made with net.Dial")

	own.Close()
	require.Eventually(t, func() bool { _, ok := ownEnds.Load(ends); return !ok }, 10*time.Second, time.Millisecond,
		"the closed connection's ends are forgotten")
}
