package exchange_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

// gatedLarge answers small requests at once (echo) and holds large ones
// (over 4 KiB) until open is closed, then answers "ok".
type gatedLarge struct {
	open     chan struct{}
	answered atomic.Int64
}

func (g *gatedLarge) Handle(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
	f := exchange.NewFrame()
	if len(req.Body) <= 4<<10 {
		f.B = append(f.B, req.Body...)
		return f, nil
	}
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.answered.Add(1)
	f.B = append(f.B, "ok"...)
	return f, nil
}

// TestBudgetBoundsQueuedRequests: 200 peers each send a 256 KiB request
// that its handler holds (as a slow service would). With an 8 MiB memory
// budget the server reads 31 of them (8 MiB / 256 KiB) and stops reading
// the other 169 connections until memory is released: it holds exactly
// 31 requests, its heap grows by less than the budget plus 64 KiB per
// connection, and a client with small calls is answered meanwhile. Once
// the handler lets the requests go, every one of the 200 is read and
// answered (nothing waits for memory for ever), and the budget returns to
// zero. Without the budget the server reads all 200 (50 MiB).
func TestBudgetBoundsQueuedRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 connections")
	}
	ctx := testCtx(t)
	const (
		n     = 200
		body  = 256 << 10
		limit = 8 << 20
	)
	h := &gatedLarge{open: make(chan struct{})}
	// Every peer comes from 127.0.0.1: no bound per address.
	s, addr := serve(t, h, &exchange.Options{MaxMemory: limit, MaxMemoryPerIP: limit, MaxPayload: 1 << 20})
	polite := dial(t, addr, nil)
	require.NoError(t, echoes(ctx, polite, "before"))

	req := make([]byte, exchange.HeaderSize+body)
	hdr := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: 1, Length: body}
	hdr.Put(req)
	before := heapInUse()
	peers := make([]net.Conn, n)
	for i := range peers {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		peers[i] = c
		_, err = c.Write(req)
		require.NoError(t, err)
	}
	fit := limit / (exchange.HeaderSize + body)
	require.Eventually(t, func() bool { return s.Throttled() == uint64(n-fit) && s.Held() == fit },
		hostileTimeout, time.Millisecond, "requests read while the budget is used up")
	for i := range 20 {
		require.NoError(t, echoes(ctx, polite, fmt.Sprintf("meanwhile %d", i)))
	}
	// The last polite request is counted held until just after its
	// answer is written, maybe after its client read it.
	require.Eventually(t, func() bool { return s.Held() == fit }, hostileTimeout, time.Millisecond,
		"held: %d, not the %d large requests", s.Held(), fit)
	// The last polite answer is given back just after it is written,
	// maybe after its client read it.
	require.Eventually(t, func() bool { return s.Budget().Used() == fit*(exchange.HeaderSize+body) }, hostileTimeout, time.Millisecond,
		"only the held requests are charged")
	grown := int64(heapInUse()) - int64(before)
	t.Logf("%d peers with 256 KiB requests held: %d read, budget used %d, heap grew %d KiB", n, fit, s.Budget().Used(), grown>>10)
	require.Less(t, grown, int64(limit+n*64<<10))

	close(h.open)
	for _, c := range peers {
		_ = c.SetReadDeadline(time.Now().Add(hostileTimeout))
		got := make([]byte, exchange.HeaderSize+2)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err, "reclaimed %d, held %d, throttled %d, budget %d", s.Reclaimed(), s.Held(), s.Throttled(), s.Budget().Used())
		require.Equal(t, "ok", string(got[exchange.HeaderSize:]))
	}
	require.Equal(t, int64(n), h.answered.Load())
	require.Eventually(t, func() bool { return s.Budget().Used() == 0 }, hostileTimeout, time.Millisecond)
}

// TestThrottledConnectionKeptAlive: a connection whose reading waits for
// room in the memory budget is treated as a paused one: the server sends
// it heartbeats and does not close it as idle (IdleTimeout is 600 ms here),
// and its request is read and answered once the memory is released.
func TestThrottledConnectionKeptAlive(t *testing.T) {
	ctx := testCtx(t)
	h := &gatedLarge{open: make(chan struct{})}
	const idle = 600 * time.Millisecond
	opts := &exchange.Options{MaxMemory: 1 << 20, MaxPayload: 768 << 10, Heartbeat: 50 * time.Millisecond, IdleTimeout: idle}
	s, addr := serve(t, h, opts)
	// The holder must outlive the wait: with a 50 ms heartbeat (dead after
	// 125 ms unheard) and a 150 ms IdleTimeout, it took the server as dead
	// under -race at load ~13 in 2 of 100 runs ("nothing from ... for
	// 154ms"), its request and memory went, and the other connection was
	// read at once, never throttled.
	holder := dial(t, addr, &exchange.Options{Heartbeat: idle / 3})
	held := make(chan error, 1)
	go func() {
		_, err := call(ctx, holder, string(make([]byte, 600<<10)))
		held <- err
	}()
	require.Eventually(t, func() bool { return s.Held() == 1 }, hostileTimeout, time.Millisecond)

	const body = 600 << 10
	req := make([]byte, exchange.HeaderSize+body)
	hdr := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: 7, Length: body}
	hdr.Put(req)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(req)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, hostileTimeout, time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(hostileTimeout))
	start := time.Now()
	for time.Since(start) < idle+100*time.Millisecond { // past IdleTimeout
		got := make([]byte, exchange.HeaderSize)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		hb, err := exchange.ParseHeader(got)
		require.NoError(t, err)
		require.True(t, hb.Event, "a heartbeat")
	}
	require.Equal(t, 2, s.Conns())

	close(h.open)
	require.NoError(t, <-held)
	readAnswer(t, c, 7, "ok", "the answer after the wait")
}

// readAnswer reads from c, past heartbeats, the response of request id
// and requires its body to be want; msg says what a failed read means.
func readAnswer(t *testing.T, c net.Conn, id uint64, want, msg string) {
	t.Helper()
	for {
		got := make([]byte, exchange.HeaderSize)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err, msg)
		r, err := exchange.ParseHeader(got)
		require.NoError(t, err)
		if r.Event {
			continue
		}
		require.Equal(t, id, r.ID)
		body := make([]byte, r.Length)
		_, err = io.ReadFull(c, body)
		require.NoError(t, err)
		require.Equal(t, want, string(body))
		return
	}
}
