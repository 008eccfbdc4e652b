package exchange_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
)

// TestThrottledWaitIsNotIdleness: a connection that waited for memory for
// longer than IdleTimeout and then takes 300 ms to send the rest of its
// frame (a third of IdleTimeout) is answered, not closed as idle: the
// time the server made it wait is not time the peer sent nothing.
func TestThrottledWaitIsNotIdleness(t *testing.T) {
	ctx := testCtx(t)
	h := &gatedLarge{open: make(chan struct{})}
	const idle = 900 * time.Millisecond
	opts := &exchange.Options{MaxMemory: 1 << 20, MaxPayload: 768 << 10, Heartbeat: 100 * time.Millisecond, IdleTimeout: idle}
	s, addr := serve(t, h, opts)
	// A third of IdleTimeout: with 50 ms (dead after 125 ms unheard) the
	// holder took the server as dead under -race at load ~14, its memory
	// went, and the other connection was never throttled.
	holder := dial(t, addr, &exchange.Options{Heartbeat: idle / 3})
	held := make(chan error, 1)
	go func() {
		_, err := call(ctx, holder, string(make([]byte, 600<<10)))
		held <- err
	}()
	require.Eventually(t, func() bool { return s.Held() == 1 }, hostileTimeout, time.Millisecond)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	req := rawFrame(exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: 7}, make([]byte, 600<<10))
	_, err = c.Write(req[:100<<10])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, hostileTimeout, time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(hostileTimeout))
	start := time.Now()
	for time.Since(start) < idle+200*time.Millisecond {
		got := make([]byte, exchange.HeaderSize)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err, "a heartbeat while the connection waits")
		hb, err := exchange.ParseHeader(got)
		require.NoError(t, err)
		require.True(t, hb.Event, "a heartbeat")
	}
	close(h.open)
	require.NoError(t, <-held)
	// The peer is slow with the rest of its frame, for less than
	// IdleTimeout: that pace is what this test is about.
	time.Sleep(idle / 3)
	_, err = c.Write(req[100<<10:])
	require.NoError(t, err)
	readAnswer(t, c, 7, "ok", "closed as idle after its wait for memory")
}
