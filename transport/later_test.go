package transport_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// laterEcho echoes every frame with SendLater from its Serve.
type laterEcho struct{ closed chan error }

func (h *laterEcho) Serve(c *transport.Conn, f *transport.Buffer) { _ = c.SendLater(f) }

func (h *laterEcho) Closed(_ *transport.Conn, err error) { h.closed <- err }

// laterServer accepts one connection and serves it with a laterEcho; it
// returns a raw client connection to it and the server's Conn.
func laterServer(t *testing.T) (net.Conn, *transport.Conn, *laterEcho) {
	t.Helper()
	client, nc := netConns(t)
	h := &laterEcho{closed: make(chan error, 1)}
	return client, transport.NewConn(nc, h, nil), h
}

// netConns gives both ends of a new loopback TCP connection: the dialled
// one and the accepted one.
func netConns(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	return socketPair(t, "tcp", "127.0.0.1:0")
}

// socketPair listens on address of network, dials it once and gives both
// ends: the dialled one and the accepted one. The listener is closed
// before it returns.
func socketPair(t *testing.T, network, address string) (dialed, accepted net.Conn) {
	t.Helper()
	l, err := net.Listen(network, address)
	require.NoError(t, err)
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	dialed, err = net.Dial(network, l.Addr().String())
	require.NoError(t, err)
	accepted = <-acc
	require.NotNil(t, accepted)
	return dialed, accepted
}

func rawFrame(id uint64, body string) []byte {
	f := frame(id, body)
	defer f.Release()
	return append([]byte(nil), f.B...)
}

// readFrame reads one frame from a raw connection and returns its id and
// body.
func readFrame(t *testing.T, c net.Conn) (uint64, string) {
	t.Helper()
	var h [transport.HeaderSize]byte
	_, err := io.ReadFull(c, h[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(h[12:16]))
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	return binary.BigEndian.Uint64(h[4:12]), string(body)
}

// sendHellos writes n frames of body "hello", of ids 0 to n-1, in one
// write, and bounds the client's reads by the test's deadline.
func sendHellos(t *testing.T, client net.Conn, n int) {
	t.Helper()
	var all []byte
	for i := range n {
		all = append(all, rawFrame(uint64(i), "hello")...)
	}
	_, err := client.Write(all)
	require.NoError(t, err)
	require.NoError(t, client.SetReadDeadline(deadline(t)))
}

// readHellos reads the echoed frames of ids from to n-1, in order.
func readHellos(t *testing.T, client net.Conn, from, n int) {
	t.Helper()
	for i := from; i < n; i++ {
		id, body := readFrame(t, client)
		require.Equal(t, uint64(i), id, "in order")
		require.Equal(t, "hello", body)
	}
}

// Frames queued with SendLater by the reader are written by the reader
// when it has read all there was, before it waits: many frames read
// together leave without the writer goroutine.
func TestSendLaterWrittenByReader(t *testing.T) {
	client, server, h := laterServer(t)
	defer client.Close()
	const n = 50
	sendHellos(t, client, n)
	readHellos(t, client, 0, n)
	// Counted after each write returns, so read once Close has waited
	// for the connection's goroutines.
	require.NoError(t, server.Close())
	require.ErrorIs(t, <-h.closed, transport.ErrClosed)
	require.Zero(t, transport.WriterWrites(server), "the reader wrote the answers itself")
}

// A reader that has read part of the next frame writes what it queued
// before it waits for the rest: the answer to the first frame does not
// wait for the second to be completed.
func TestSendLaterFlushedBeforePartialFrame(t *testing.T) {
	for name, cut := range map[string]int{"in the header": 5, "in the body": transport.HeaderSize + 3} {
		t.Run(name, func(t *testing.T) {
			client, server, h := laterServer(t)
			defer client.Close()
			second := rawFrame(2, "second frame")
			_, err := client.Write(append(rawFrame(1, "first"), second[:cut]...))
			require.NoError(t, err)
			require.NoError(t, client.SetReadDeadline(deadline(t)))
			id, body := readFrame(t, client)
			require.Equal(t, uint64(1), id)
			require.Equal(t, "first", body)
			_, err = client.Write(second[cut:])
			require.NoError(t, err)
			id, body = readFrame(t, client)
			require.Equal(t, uint64(2), id)
			require.Equal(t, "second frame", body)
			require.NoError(t, server.Close())
			require.ErrorIs(t, <-h.closed, transport.ErrClosed)
		})
	}
}

// On a connection that cannot write directly (here a pipe), SendLater is
// Send.
func TestSendLaterOnPipeIsSend(t *testing.T) {
	ctx := testCtx(t)
	client := newRecorder(false)
	a, b := pipePair(t, client, &laterEcho{closed: make(chan error, 1)})
	require.NoError(t, a.Send(frame(7, "x")))
	got := recv(t, ctx, client.frames)
	require.Equal(t, uint64(7), binary.BigEndian.Uint64(got[4:12]))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
}

// deadline bounds a raw client's reads in these tests.
func deadline(t *testing.T) time.Time {
	d, _ := testCtx(t).Deadline()
	return d
}

// A frame of 4 KiB or more given to SendLater goes to the writer, which
// gathers such frames better than a reader that reads them one at a time.
func TestSendLaterLargeFramesGoToWriter(t *testing.T) {
	client, server, h := laterServer(t)
	defer client.Close()
	big := strings.Repeat("b", 8<<10)
	_, err := client.Write(rawFrame(1, big))
	require.NoError(t, err)
	require.NoError(t, client.SetReadDeadline(deadline(t)))
	id, body := readFrame(t, client)
	require.Equal(t, uint64(1), id)
	require.Equal(t, big, body)
	require.NoError(t, server.Close())
	require.ErrorIs(t, <-h.closed, transport.ErrClosed)
	require.Equal(t, uint64(1), transport.WriterWrites(server), "the writer wrote it")
}

// gatedEcho echoes every frame with SendLater, but holds the answer to
// frame last until gate is closed or ctx ends; passed reports whether the
// gate was open by then.
type gatedEcho struct {
	ctx    context.Context
	last   uint64
	gate   chan struct{}
	passed chan bool
	closed chan error
}

func (h *gatedEcho) Serve(c *transport.Conn, f *transport.Buffer) {
	if binary.BigEndian.Uint64(f.B[4:12]) == h.last {
		select {
		case <-h.gate:
			h.passed <- true
		case <-h.ctx.Done():
			h.passed <- false
		}
	}
	_ = c.SendLater(f)
}

func (h *gatedEcho) Closed(_ *transport.Conn, err error) { h.closed <- err }

// Many frames read together are answered in two writes: the first half
// leaves while the reader still serves the second (the peer starts on
// those answers meanwhile), the rest before the reader waits for more.
// Here the last frame's answer waits until the client has the first
// answer: with all answers written at the end, it would wait for ever.
func TestSendLaterSplitsLongRead(t *testing.T) {
	ctx := testCtx(t)
	client, nc := netConns(t)
	defer client.Close()
	const n = 16
	h := &gatedEcho{ctx: ctx, last: n - 1, gate: make(chan struct{}), passed: make(chan bool, 1), closed: make(chan error, 1)}
	server := transport.NewConn(nc, h, nil)
	sendHellos(t, client, n)
	id, body := readFrame(t, client)
	require.Equal(t, uint64(0), id)
	require.Equal(t, "hello", body)
	close(h.gate)
	require.True(t, <-h.passed, "the first answers left before the last request of the read was answered")
	readHellos(t, client, 1, n)
	// The counts are made after each write returns: the client may have
	// read its bytes before that, so they are read after Close, which
	// waits for the connection's goroutines.
	require.NoError(t, server.Close())
	require.ErrorIs(t, <-h.closed, transport.ErrClosed)
	require.Equal(t, uint64(2), transport.LaterWrites(server), "two writes: half of the read, then the rest")
	require.Zero(t, transport.WriterWrites(server))
}

// A read of fewer than twice LaterSplit frames is answered with one write.
func TestSendLaterShortReadOneWrite(t *testing.T) {
	client, server, h := laterServer(t)
	defer client.Close()
	n := 2*transport.LaterSplit - 1
	sendHellos(t, client, n)
	readHellos(t, client, 0, n)
	require.NoError(t, server.Close()) // then the count is final: see above
	require.ErrorIs(t, <-h.closed, transport.ErrClosed)
	require.Equal(t, uint64(1), transport.LaterWrites(server))
	require.Zero(t, transport.WriterWrites(server))
}
