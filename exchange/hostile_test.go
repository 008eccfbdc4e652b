package exchange_test

import (
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
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
// measures the bound exactly).
func TestFloodWithoutReadingBounded(t *testing.T) {
	ctx := testCtx(t)
	const maxQueue = 1 << 20
	h := &counting{Handler: newEcho()}
	s, addr := serve(t, h, &exchange.Options{MaxQueue: maxQueue})
	polite := dial(t, addr, nil)
	got, err := call(ctx, polite, "before")
	require.NoError(t, err)
	require.Equal(t, "before", got)

	const n = 200_000 // 3.4 MB of answers
	flood := rawRequests(n)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	// A small receive window: the answers wait in the server's memory,
	// not in the kernel's buffers.
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(4<<10))
	before := heapInUse()
	wrote := make(chan error, 1)
	go func() {
		_ = nc.SetWriteDeadline(time.Now().Add(hostileTimeout))
		_, err := nc.Write(flood)
		wrote <- err
	}()
	// Until the server has answered every request or closed the flood.
	require.Eventually(t, func() bool { return h.n.Load() == n+1 || s.Conns() == 1 }, hostileTimeout, time.Millisecond)
	grown := int64(heapInUse()) - int64(before)
	t.Logf("%d requests sent, %d answered, flood closed %v: heap in use grew by %d KiB (MaxQueue %d KiB)",
		n, h.n.Load()-1, s.Conns() == 1, grown>>10, maxQueue>>10)
	require.Less(t, grown, int64(2*maxQueue+2<<20), "the answers queued for a peer that does not read")

	got, err = call(ctx, polite, "after")
	require.NoError(t, err)
	require.Equal(t, "after", got)
	nc.Close()
	<-wrote
}
