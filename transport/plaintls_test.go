package transport_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/transport"
)

// TestPlainOnTLS: a TLS server with PlainOnTLS answers a peer that sends a
// frame in plain TCP with what PlainOnTLS returns for its header, then
// closes; a peer that sends something that is neither a frame nor TLS is
// closed without an answer; TLS peers are served as before (the bytes
// read to tell them apart are handed to the handshake).
func TestPlainOnTLS(t *testing.T) {
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	var mu sync.Mutex
	var seen []byte
	seenID := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, transport.HeaderSize)
		return binary.BigEndian.Uint64(seen[4:12])
	}
	srv, addr := serve(t, newRecorder(true), &transport.Options{TLS: serverTLS, PlainOnTLS: func(h []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		seen = append([]byte(nil), h...)
		return []byte("speak TLS")
	}})

	exchange := func(send []byte) []byte {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Write(send)
		require.NoError(t, err)
		got, err := io.ReadAll(c) // until the server closes
		require.NoError(t, err)
		return got
	}
	f := frame(42, "plain")
	require.Equal(t, "speak TLS", string(exchange(f.B)))
	require.Equal(t, uint64(42), seenID())
	// A body the server has not read would reset the connection and
	// could destroy the answer: it is read first.
	big := frame(43, strings.Repeat("x", 200<<10))
	require.Equal(t, "speak TLS", string(exchange(big.B)))
	require.Equal(t, uint64(43), seenID())
	require.Empty(t, exchange([]byte("GET / HTTP/1.0\r\n\r\n")))
	require.Eventually(t, func() bool { return srv.FailedHandshakes() == 3 }, 10*time.Second, time.Millisecond)

	rec := newRecorder(false)
	c, err := transport.Dial(ctx, addr, rec, &transport.Options{TLS: clientTLS})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Send(frame(1, "secret")))
	got := recv(t, ctx, rec.frames)
	require.Equal(t, "secret", string(got[transport.HeaderSize:]))
}
