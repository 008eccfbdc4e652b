package exchange_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// hostileTimeout bounds each wait of the hostile-peer tests.
const hostileTimeout = 10 * time.Second

// counting is a Handler that counts the requests it answered.
type counting struct {
	exchange.Handler
	n atomic.Int64
}

func (c *counting) Handle(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
	defer c.n.Add(1)
	return c.Handler.Handle(ctx, req)
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// tcpWmemMax is the most the kernel lets a TCP socket's send buffer grow
// to (the third field of net.ipv4.tcp_wmem), or 4 MiB when that cannot be
// read (at most 16 MiB, so the flood stays under 50 MB).
func tcpWmemMax() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return 4 << 20
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 4 << 20
	}
	v, err := strconv.Atoi(f[2])
	if err != nil || v < 4<<20 {
		return 4 << 20
	}
	return min(v, 16<<20)
}

// rawRequests returns n two-way request frames with a one-byte body.
func rawRequests(n int) []byte {
	one := make([]byte, exchange.HeaderSize+1)
	h := exchange.Header{Request: true, TwoWay: true, Serializer: 27, Length: 1}
	b := make([]byte, 0, n*len(one))
	for i := range n {
		h.ID = uint64(i + 1)
		h.Put(one)
		one[exchange.HeaderSize] = 'x'
		b = append(b, one...)
	}
	return b
}

// TestFloodWithoutReadingBounded: a peer that sends many small requests
// and never reads its answers makes the server queue them, but never more
// memory than MaxQueue (and its connection is closed once that is
// reached); a polite client on another connection is served throughout.
// Answers used to count only their bytes against MaxQueue while each kept
// a whole pooled buffer and its Buffer: here 5.9 MiB were in use after the
// flood with MaxQueue 1 MiB (transport's TestSmallFramesChargedWhole
// measures the bound exactly). The answers (three times the most a
// send buffer may grow to) do not fit in the kernels' buffers behind a
// 32 KiB receive buffer, and a MaxQueue that
// counts each answer 1 KiB or more closes the flood after about a
// thousand queued; counted by their 17 bytes, the answers all went out
// and nothing closed it. (Now and then the kernels stall such a
// connection mid-frame for seconds; FrameTimeout closes it then.)
func TestFloodWithoutReadingBounded(t *testing.T) {
	// More answers than the kernel can hold: the server's send buffer
	// grows up to tcp_wmem's maximum (4 MiB here), and under load it took
	// all of 200,000 answers (3.4 MB) once, so that nothing was left
	// queued to close the connection for. Three times that maximum in
	// answers of 17 bytes each. Built before testCtx's 10 s begin: under
	// -race at load 34 the 740,000 requests took 1.9-3.1 s to build, and
	// in CI's race stage the dial after them ran out of the 10 s ("dial
	// tcp: i/o timeout", 11.65 s).
	n := 3 * tcpWmemMax() / (exchange.HeaderSize + 1)
	flood := rawRequests(n)
	ctx := testCtx(t)
	const maxQueue = 1 << 20
	h := &counting{Handler: newEcho()}
	s, addr := serve(t, h, &exchange.Options{MaxQueue: maxQueue})
	polite := dial(t, addr, nil)
	got, err := call(ctx, polite, "before")
	require.NoError(t, err)
	require.Equal(t, "before", got)

	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	// A small receive buffer: the answers wait in the server's memory,
	// not in the kernel's. (At 4 KiB the kernel drops the server's
	// segments and both ends back off, for seconds at times: the server
	// then cuts the connection after FrameTimeout, which is right but
	// slow.)
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(32<<10))
	before := heapInUse()
	wrote := make(chan error, 1)
	go func() {
		_ = nc.SetWriteDeadline(time.Now().Add(9 * hostileTimeout))
		_, err := nc.Write(flood)
		wrote <- err
	}()
	// Until the server has answered the flood and closed it: the polite
	// client's call was the first answer, so more means the flood was
	// accepted, and one connection left that it was closed. (It takes the
	// answers that fill the kernel's buffers first, up to about 250,000:
	// under -race and CPU burners at load ~30 that took 8-20 s, and twice
	// in 8 runs the flood's write deadline, 10 s then, ended it after about
	// 77,000 requests, whose answers the kernels held: nothing to close.)
	if !assert.Eventually(t, func() bool { return h.n.Load() > 1 && s.Conns() == 1 }, 9*hostileTimeout, time.Millisecond) {
		t.Fatalf("the server did not close the connection that does not read its answers: %d answered, %d connections", h.n.Load()-1, s.Conns())
	}
	grown := int64(heapInUse()) - int64(before)
	// The flood's own bytes were in the heap at before: kept alive to
	// here, so that their collection does not hide what the server holds.
	runtime.KeepAlive(flood)
	t.Logf("%d requests sent, %d answered, flood closed %v: heap in use grew by %d KiB (MaxQueue %d KiB)",
		n, h.n.Load()-1, s.Conns() == 1, grown>>10, maxQueue>>10)
	require.Less(t, grown, int64(2*maxQueue+2<<20), "the answers queued for a peer that does not read")

	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	got, err = call(ctx, polite, "after")
	require.NoError(t, err)
	require.Equal(t, "after", got)
	nc.Close()
	<-wrote
}

// forger is a provider that answers each request with a response for an
// id never sent, then the right response, then the right response again,
// then a heartbeat response nobody asked for.
func forger(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		answer := func(id uint64, event bool, body string) []byte {
			b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
			h := exchange.Header{Serializer: 27, Status: status.OK, Event: event, ID: id, Length: uint32(len(body))}
			h.Put(b)
			return append(b, body...)
		}
		for {
			h, body, err := readFrame(nc)
			if err != nil {
				return
			}
			if h.Event {
				continue
			}
			var out []byte
			out = append(out, answer(h.ID+1<<40, false, "forged")...)
			out = append(out, answer(h.ID, false, "re:"+string(body))...)
			out = append(out, answer(h.ID, false, "duplicate")...)
			out = append(out, answer(h.ID+7, true, "")...)
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	}()
	return l.Addr().String()
}

// TestForgedAndDuplicateResponses: responses for ids the client never
// sent, a second response for an answered call, and heartbeat responses
// nobody asked for are dropped and counted (Late); every call gets its
// own answer, sequential or concurrent, and the connection stays up.
func TestForgedAndDuplicateResponses(t *testing.T) {
	ctx := testCtx(t)
	c := dial(t, forger(t), nil)
	const sequential, concurrent = 20, 16
	for i := range sequential {
		got, err := call(ctx, c, fmt.Sprint("s", i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("re:s", i), got)
	}
	errs := make(chan error, concurrent)
	for i := range concurrent {
		go func() {
			got, err := call(ctx, c, fmt.Sprint("c", i))
			if err == nil && got != fmt.Sprint("re:c", i) {
				err = fmt.Errorf("call c%d got %q", i, got)
			}
			errs <- err
		}()
	}
	for range concurrent {
		require.NoError(t, <-errs)
	}
	// Two late frames per call (the forged one and the duplicate); the
	// heartbeat responses are events, dropped without counting.
	const n = sequential + concurrent
	require.Eventually(t, func() bool { return c.Late() == 2*n }, hostileTimeout, time.Millisecond, "late %d, want %d", c.Late(), 2*n)
	got, err := call(ctx, c, "still")
	require.NoError(t, err)
	require.Equal(t, "re:still", got)
}

// TestCloseEndsWithHostilePeers: a server with a peer stopped within a
// frame, a peer that floods requests and reads nothing, and idle peers
// closes in bounded time (Close writes what is queued for at most a
// second per connection, all at once), and leaves no goroutine behind.
func TestCloseEndsWithHostilePeers(t *testing.T) {
	ctx := testCtx(t)
	s, err := exchange.NewServer(newEcho(), nil)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	addr := l.Addr().String()
	var d net.Dialer
	dialRaw := func() net.Conn {
		nc, err := d.DialContext(ctx, "tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	polite := dial(t, addr, nil)
	_, err = call(ctx, polite, "hello")
	require.NoError(t, err)
	for range 3 {
		dialRaw() // idle
	}
	partial := dialRaw()
	_, err = partial.Write(rawRequests(1)[:exchange.HeaderSize+0]) // a header, no body
	require.NoError(t, err)
	flood := dialRaw()
	require.NoError(t, flood.(*net.TCPConn).SetReadBuffer(4<<10))
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		b := rawRequests(10_000)
		_ = flood.SetWriteDeadline(time.Now().Add(hostileTimeout))
		for {
			if _, err := flood.Write(b); err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return s.Conns() == 6 }, hostileTimeout, time.Millisecond)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	require.ErrorIs(t, <-served, transport.ErrServerClosed)
	require.Zero(t, s.Conns())
	flood.Close()
	<-flooding
}

// readFrame reads one frame from r, as a fake peer of a test does: its
// header and its body (fakepeer.ReadFrame, by the name these tests use).
var readFrame = fakepeer.ReadFrame
