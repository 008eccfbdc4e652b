package exchange_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
)

// The consumer against a broken or hostile provider: each fake provider
// here is a raw TCP listener on 127.0.0.1 that reads the client's
// requests and writes what a test tells it to (scriptedPeer).

// TestBadProviderBytesNameIt: bytes no provider should send close the
// connection, and the calls and the client's error say which provider
// sent them (they said only "bad magic" or "frame too large").
func TestBadProviderBytesNameIt(t *testing.T) {
	for name, c := range map[string]struct {
		answer func(out exchange.Header) []byte
		want   string
	}{
		"wrong magic": {func(out exchange.Header) []byte {
			b := peerFrame(out, []byte("x"))
			b[0], b[1] = 'H', 'T'
			return b
		}, "bad magic"},
		"garbage": {func(exchange.Header) []byte { return []byte("HTTP/1.1 400 Bad Request\r\n\r\n") }, "bad magic"},
		"a body over MaxPayload": {func(out exchange.Header) []byte {
			out.Length = exchange.DefaultMaxPayload + 1
			return peerFrame(out, nil)
		}, "frame too large"},
		"half a header, then the end": {func(out exchange.Header) []byte { return peerFrame(out, nil)[:7] }, "unexpected EOF"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			addr := scriptedPeer(t, 1, false, func(_ int, out exchange.Header, _ []byte) []byte { return c.answer(out) })
			cl := dial(t, addr, nil)
			_, err := cl.Call(ctx, 0, 27, request("x"))
			require.ErrorIs(t, err, status.ErrConnLost)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, 1, strings.Count(err.Error(), addr), "names the provider once: %v", err)
			<-cl.Done()
			require.Eventually(t, func() bool { return cl.Err() != nil }, hostileTimeout, time.Millisecond)
			require.Contains(t, cl.Err().Error(), "provider "+addr)
		})
	}
}

// TestStatusMessageBounded: the message of a non-OK response is the
// provider's text: it is cut at MaxStatusMessage and has no control
// characters (a provider put 1 MiB with terminal escapes into the
// caller's error); a status no provider sends says so and names the
// provider.
func TestStatusMessageBounded(t *testing.T) {
	msg := append([]byte("\x1b[2J\x1b[31mnot found\n"), bytes.Repeat([]byte{'e'}, 1<<20)...)
	for name, c := range map[string]struct {
		code status.Code
		is   error
		want string
	}{
		"known status":   {status.ServiceNotFound, status.ErrServiceNotFound, "\uFFFD[2J\uFFFD[31mnot found\neee"},
		"unknown status": {238, status.ErrBadResponse, "answered with unknown status 238"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			addr := scriptedPeer(t, 2, true, func(_ int, out exchange.Header, _ []byte) []byte {
				out.Status, out.Length = c.code, uint32(len(msg))
				return peerFrame(out, msg)
			})
			cl := dial(t, addr, nil)
			for _, async := range []bool{false, true} {
				var err error
				if async {
					_, err = cl.Go(ctx, 0, 27, request("x")).Result()
				} else {
					_, err = cl.Call(ctx, 0, 27, request("x"))
				}
				var se *status.Error
				require.ErrorAs(t, err, &se)
				require.Less(t, len(err.Error()), exchange.MaxStatusMessage+200, "the message is bounded")
				require.Equal(t, c.code, se.Code)
				require.ErrorIs(t, err, c.is)
				require.Contains(t, err.Error(), c.want)
				require.Contains(t, err.Error(), "more bytes cut)")
				require.NotContains(t, err.Error(), "\x1b")
				if c.code == 238 {
					require.Contains(t, err.Error(), "provider "+addr)
				}
			}
			require.NoError(t, cl.Err(), "a status answer keeps the connection")
		})
	}
}

// TestStrayResponsesLoggedOnce: responses for ids the client never sent
// are dropped and counted (Late), the connection is kept, and the first
// is logged, once per connection, naming the provider.
func TestStrayResponsesLoggedOnce(t *testing.T) {
	ctx := testCtx(t)
	core, logs := observer.New(zap.WarnLevel)
	addr := forger(t)
	c := dial(t, addr, &exchange.Options{Logger: zap.New(core)})
	const n = 10
	for i := range n {
		_, err := call(ctx, c, "x")
		require.NoError(t, err, "call %d", i)
	}
	require.Eventually(t, func() bool { return c.Late() == 2*n }, hostileTimeout, time.Millisecond)
	require.NoError(t, c.Err())
	stray := logs.FilterMessageSnippet("never sent").All()
	require.Len(t, stray, 1, "logged once: %v", logs.All())
	require.Equal(t, addr, stray[0].ContextMap()["provider"])
}

// TestStalledRepliesCostLittle: a provider that sends the header of an
// 8 MiB reply (MaxPayload) and nothing more: the call ends at its own
// timeout, the connection at FrameTimeout (naming the provider), and
// until then the declared size is not allocated: 32 connections each
// stalled in such a reply hold about 106 KiB each (the frame's first
// 64 KiB read step, the 32 KiB read buffer, goroutines), not 8 MiB.
func TestStalledRepliesCostLittle(t *testing.T) {
	const conns = 32
	ctx := testCtx(t)
	before := heapInUse()
	cls := make([]*exchange.Client, conns)
	for i := range cls {
		addr := scriptedPeer(t, 1, true, func(_ int, out exchange.Header, _ []byte) []byte {
			out.Length = exchange.DefaultMaxPayload
			return peerFrame(out, nil)
		})
		cls[i] = dial(t, addr, &exchange.Options{FrameTimeout: time.Minute})
		_, err := cls[i].Call(ctx, 20*time.Millisecond, 27, request("x"))
		var te *status.TimeoutError
		require.ErrorAs(t, err, &te)
	}
	held := int64(heapInUse()) - int64(before)
	t.Logf("%d connections stalled in an 8 MiB reply: heap +%d KiB (%d KiB each)", conns, held>>10, held/conns>>10)
	require.Less(t, held, int64(conns*256<<10), "not the declared size: %d bytes held", held)
	for _, c := range cls {
		require.NoError(t, c.Err(), "kept until FrameTimeout")
	}

	// With a short FrameTimeout the connection ends, naming the provider.
	addr := scriptedPeer(t, 1, true, func(_ int, out exchange.Header, _ []byte) []byte {
		out.Length = exchange.DefaultMaxPayload
		return peerFrame(out, make([]byte, 1000))
	})
	c := dial(t, addr, &exchange.Options{FrameTimeout: 200 * time.Millisecond})
	_, err := c.Call(context.Background(), time.Minute, 27, request("x"))
	require.ErrorIs(t, err, status.ErrConnLost)
	require.ErrorContains(t, err, addr)
	require.ErrorContains(t, err, "sent part of a frame and nothing more")
}

// TestHeartbeatFloodBounded: a provider that sends heartbeats without end
// and reads nothing: the client answers while little waits to be written
// and then stops answering, so it holds next to nothing and keeps the
// connection. It used to queue an answer per heartbeat until MaxQueue
// (66 MB of heap at the default 64 MiB) and then close the connection.
func TestHeartbeatFloodBounded(t *testing.T) {
	const batches, perBatch = 16, 4096
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	flooded := make(chan error, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			flooded <- err
			return
		}
		defer nc.Close()
		_ = nc.(*net.TCPConn).SetReadBuffer(32 << 10)
		var b []byte
		for i := range perBatch {
			h := exchange.Header{Request: true, TwoWay: true, Event: true, ID: uint64(i + 1)}
			b = append(b, peerFrame(h, nil)...)
		}
		_ = nc.SetWriteDeadline(time.Now().Add(hostileTimeout))
		for range batches {
			if _, err := nc.Write(b); err != nil {
				flooded <- err
				return
			}
		}
		// Last, the read-only event: the client has read the flood when
		// it has read this.
		ro := []byte("R")
		_, err = nc.Write(peerFrame(exchange.Header{Request: true, Event: true, Length: uint32(len(ro))}, ro))
		flooded <- err
		<-t.Context().Done()
	}()
	var d net.Dialer
	nc, err := d.DialContext(testCtx(t), "tcp", l.Addr().String())
	require.NoError(t, err)
	// A small send buffer: the answers wait in the client's memory, not
	// in the kernel's. A receive buffer that takes the whole flood (1 MiB):
	// a client slowed down (-race, a loaded machine) otherwise closes its
	// window, and the kernel of a provider whose own receive buffer is
	// full of answers drops the window's reopening: the flood stalled for
	// seconds.
	require.NoError(t, nc.(*net.TCPConn).SetWriteBuffer(32<<10))
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(4<<20))
	before := heapInUse()
	c := exchange.NewClient(nc, &exchange.Options{MaxQueue: 1 << 20, FrameTimeout: time.Minute})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, <-flooded)
	require.Eventually(t, func() bool { return c.ReadOnly() || c.Err() != nil }, hostileTimeout, time.Millisecond, "the flood read")
	require.NoError(t, c.Err(), "the connection is kept")
	require.True(t, c.ReadOnly())
	held := int64(heapInUse()) - int64(before)
	t.Logf("%d heartbeats from a provider that reads nothing: heap +%d KiB", batches*perBatch, held>>10)
	require.Less(t, held, int64(1<<20))
}
