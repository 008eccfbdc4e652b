package dubbo_test

import (
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// stallProviders starts n providers on 127.0.0.1 that answer every call
// with the header of a reply of size bytes and all of its body but the
// last byte (one array, shared, allocated before the test measures), and
// then nothing; with warm, a connection's first call is answered okReply.
// It returns their URLs, with timeout (ms) set.
func stallProviders(t *testing.T, n, size int, timeout string, warm bool) []*protocol.URL {
	body := make([]byte, size-1)
	serve := func(nc net.Conn, _ <-chan struct{}) {
		defer nc.Close()
		for first := warm; ; {
			h, err := fakepeer.SkipFrame(nc)
			if err != nil {
				return
			}
			if h.Event {
				continue
			}
			var hdr [exchange.HeaderSize]byte
			if first {
				first = false
				out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(len(okReply))}
				out.Put(hdr[:])
				if _, err := nc.Write(append(hdr[:], okReply...)); err != nil {
					return
				}
				continue
			}
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(size)}
			out.Put(hdr[:])
			if _, err := nc.Write(hdr[:]); err != nil {
				return
			}
			if _, err := nc.Write(body); err != nil {
				return
			}
		}
	}
	var urls []*protocol.URL
	for range n {
		a := fakepeer.Listen(t, serve)
		urls = append(urls, protocol.NewURL("dubbo", "127.0.0.1", a.Port, "demo.Greeter", map[string]string{protocol.KeyTimeout: timeout}))
	}
	return urls
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestReplyMemoryBoundsStalledProviders: 8 providers each answer with
// all but the last byte of an 8 MiB reply and stall. Before
// MaxReplyMemory the consumer held all of it (8 x 8 MiB, +64 MiB of live
// heap, and N x Connections x MaxPayload for N such providers); now the
// replies in progress hold at most MaxReplyMemory (32 MiB: three of them;
// the others wait unread): the live heap, measured once the three have
// arrived and the five wait, stays under it plus 4 MiB. An honest
// provider's calls (16 KiB replies, over the 4 KiB that never wait) are
// answered meanwhile; the stalled replies are cut once nothing of them
// arrived for a tenth of FrameTimeout while others waited, three by three
// (the calls fail with the connection lost, naming the provider), and
// those left when nothing waits end at their calls' timeout (naming the
// provider too); the budget is empty after.
func TestReplyMemoryBoundsStalledProviders(t *testing.T) {
	const (
		stallers = 8
		limit    = 32 << 20
		fit      = limit / (exchange.DefaultMaxPayload + exchange.HeaderSize) // 3
		slack    = 4 << 20
		reply    = 16 << 10
	)
	ctx := testCtx(t)
	_, hu := export(t, newProtocol(t, nil), providerURL("demo.Greeter", protocol.KeyTimeout, testTimeoutMillis))
	// The stalled calls' timeout (12 s) leaves the cuts, which come 2-3 s
	// after a reply stops (a tenth of FrameTimeout, seen by looks every
	// twentieth), a wide margin also when reading the first 24 MiB takes
	// seconds (-race at load 20: with 6 s no reply was cut in time).
	urls := stallProviders(t, stallers, exchange.DefaultMaxPayload, "12000", false)
	// Cut after 2 s of nothing while others wait: the measure below is
	// taken well before, while nothing is cut and nothing is allocated.
	cli := newProtocol(t, &dubbo.Options{MaxReplyMemory: limit, FrameTimeout: 20 * time.Second})
	honest := refer(t, cli, hu)
	var got string
	_, err := honest.Invoke(ctx, &protocol.Invocation{Method: "Big", Args: []any{reply}, Reply: &got})
	require.NoError(t, err)
	invs := make([]protocol.Invoker, stallers)
	for i, u := range urls {
		invs[i] = refer(t, cli, u)
	}
	base := heapInUse()

	errs := make([]error, stallers)
	var stalled sync.WaitGroup
	var pending atomic.Int32
	pending.Store(stallers)
	for i, inv := range invs {
		stalled.Go(func() {
			defer pending.Add(-1)
			_, errs[i] = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
		})
	}
	// Held: the replies that fit have arrived (all but a byte) and the
	// others wait; or (before MaxReplyMemory) all arrived.
	// Two samples in a row alike: no body is growing (while one is, its
	// old array and its new one are both live for a moment).
	var held, prev int64
	require.Eventually(t, func() bool {
		prev, held = held, heapInUse()-base
		return held >= fit*(exchange.DefaultMaxPayload-1<<20) && max(held-prev, prev-held) < 256<<10 &&
			(cli.Stats().ReplyThrottled >= stallers-fit || held >= stallers*(exchange.DefaultMaxPayload-1<<20))
	}, testTimeout, time.Millisecond)
	st := cli.Stats()
	t.Logf("%d providers stalled in 8 MiB replies: live heap +%.1f MiB; %+v", stallers, float64(held)/(1<<20), st)
	require.LessOrEqual(t, held, int64(limit+slack), "live heap while %d providers stall in 8 MiB replies", stallers)
	require.Equal(t, fit*(exchange.DefaultMaxPayload+exchange.HeaderSize), st.ReplyMemoryHeld)

	// The honest provider's calls while stalled ones are pending.
	var ok atomic.Int64
	var honestErr atomic.Pointer[error]
	var callers sync.WaitGroup
	for range 4 {
		callers.Go(func() {
			for pending.Load() > 0 {
				var s string
				if _, err := honest.Invoke(ctx, &protocol.Invocation{Method: "Big", Args: []any{reply}, Reply: &s}); err != nil {
					honestErr.CompareAndSwap(nil, &err)
					return
				}
				if pending.Load() > 0 {
					ok.Add(1)
				}
			}
		})
	}
	stalled.Wait()
	callers.Wait()
	st = cli.Stats()
	t.Logf("honest calls answered while stalled ones were pending: %d; %+v", ok.Load(), st)
	if p := honestErr.Load(); p != nil {
		require.NoError(t, *p, "an honest provider's call")
	}
	require.NotZero(t, ok.Load(), "honest calls answered while the stalled ones were pending")
	cut := 0
	for i, err := range errs {
		addr := "127.0.0.1:" + strconv.Itoa(urls[i].Port)
		var te *status.TimeoutError
		if errors.As(err, &te) {
			require.Equal(t, addr, te.Addr)
			continue
		}
		cut++
		require.ErrorIs(t, err, status.ErrConnLost, "stalled call %d", i)
		require.ErrorIs(t, err, transport.ErrSlowFrame, "stalled call %d", i)
		require.ErrorContains(t, err, addr+" sent 8388607 bytes of a 8388608-byte body and nothing more for")
		require.ErrorContains(t, err, "dubbo.Options.MaxReplyMemory", "the cut says which option bounds it")
	}
	require.NotZero(t, cut, "stalled replies cut while others waited: %v", errs)
	// The first replies in progress are cut while others wait; a call may
	// time out first (a starved machine) and its reply be cut after.
	require.GreaterOrEqual(t, st.ReplyReclaimed, uint64(cut))
	require.Eventually(t, func() bool { return cli.Stats().ReplyReclaimed >= fit }, testTimeout, time.Millisecond,
		"the first %d replies in progress cut while others waited: %+v; %v", fit, cli.Stats(), errs)
	cli.Close() // the replies still in progress (until FrameTimeout) end
	require.Eventually(t, func() bool { return cli.Stats().ReplyMemoryHeld == 0 }, testTimeout, time.Millisecond,
		"budget empty after: %d", cli.Stats().ReplyMemoryHeld)
}

// TestReplyWaitNamesMaxReplyMemory: with room for one reply in progress,
// three providers that stall in theirs: the two whose replies wait unread
// time out saying so, naming the provider and MaxReplyMemory; the one in
// progress is a plain timeout. Each call returns at its timeout, also when
// its own caller was the one reading the connection (a caller that reads
// stops waiting for memory at its deadline). Nothing is held after.
func TestReplyWaitNamesMaxReplyMemory(t *testing.T) {
	const payload = 1 << 20
	ctx := testCtx(t)
	urls := stallProviders(t, 3, payload, "500", true)
	cli := newProtocol(t, &dubbo.Options{MaxPayload: payload, MaxReplyMemory: payload + exchange.HeaderSize, FrameTimeout: testTimeout})
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		inv := refer(t, cli, u)
		// Connected (a dial under -race may take longer than 500 ms).
		require.Eventually(t, func() bool {
			var s string
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: &s})
			return err == nil && s == "hi"
		}, testTimeout, time.Millisecond)
		wg.Go(func() {
			_, errs[i] = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
		})
	}
	wg.Wait()
	waited := 0
	for i, err := range errs {
		var te *status.TimeoutError
		require.ErrorAs(t, err, &te, "call %d", i)
		addr := "127.0.0.1:" + strconv.Itoa(urls[i].Port)
		require.Equal(t, addr, te.Addr)
		require.True(t, strings.HasPrefix(err.Error(), "demo.Greeter.SayHello timed out after 500ms on the consumer calling "+addr), err.Error())
		if strings.Contains(err.Error(), "dubbo.Options.MaxReplyMemory") {
			waited++
			require.ErrorContains(t, err, "its response was not read: the connection to provider "+addr+" stopped reading because the responses in progress across the consumer held")
		}
	}
	require.Equal(t, 2, waited, "%v", errs)
	// One wait per reply that waited, also when a reading caller left it
	// at its deadline and the next reader took it up again.
	require.Equal(t, uint64(2), cli.Stats().ReplyThrottled)
	cli.Close()
	require.Eventually(t, func() bool { return cli.Stats().ReplyMemoryHeld == 0 }, testTimeout, time.Millisecond)
}

// TestMaxReplyMemoryValidated: a MaxReplyMemory that cannot hold one
// answer of MaxPayload is refused, naming both.
func TestMaxReplyMemoryValidated(t *testing.T) {
	_, err := dubbo.New(&dubbo.Options{MaxReplyMemory: 1 << 20})
	require.ErrorContains(t, err, "dubbo: MaxReplyMemory 1048576 is less than one answer of MaxPayload 8388608")
	_, err = dubbo.New(&dubbo.Options{MaxReplyMemory: -1})
	require.ErrorContains(t, err, "MaxReplyMemory")
}

// TestCallsBehindStalledReplyRedial: a provider declares an 8 MiB reply
// (or a 4 KiB one, which MaxReplyMemory does not charge), sends its
// header and stalls. Calls to it time out behind that reply; once it got
// no byte between two calls' timeouts, the connection is closed (its
// calls fail with ErrConnLost naming the provider, saying why) and
// dialled again, and calls are answered, long before FrameTimeout (10 s
// here) would have ended it. The same over TLS (a TLS provider, the
// consumer's redial a TLS dial too).
func TestCallsBehindStalledReplyRedial(t *testing.T) {
	serverTLS, clientTLS := testcert.SelfSigned(t)
	for _, length := range []int{exchange.DefaultMaxPayload, 4<<10 - exchange.HeaderSize} {
		t.Run(strconv.Itoa(length), func(t *testing.T) { callsBehindStalledReplyRedial(t, length, nil, nil) })
		t.Run(strconv.Itoa(length)+"/TLS", func(t *testing.T) { callsBehindStalledReplyRedial(t, length, serverTLS, clientTLS) })
	}
}

func callsBehindStalledReplyRedial(t *testing.T, length int, serverTLS, clientTLS *tls.Config) {
	ctx := testCtx(t)
	u, accepted := stallingProviderOn(t, length, serverTLS) // 100 ms calls
	// The rule needs a tenth of FrameTimeout without a byte: 1 s here.
	cli := newProtocol(t, &dubbo.Options{FrameTimeout: 10 * time.Second, Reconnect: 10 * time.Millisecond, ClientTLS: clientTLS})
	inv := refer(t, cli, u)
	var lost error
	timeouts := 0
	for i := 0; lost == nil; i++ {
		// Without the rule, FrameTimeout's 10 s: 100 calls of 100 ms.
		require.Less(t, i, 100, "still open after %d calls (%d timed out)", i, timeouts)
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
		var te *status.TimeoutError
		switch {
		case errors.As(err, &te):
			timeouts++
		case errors.Is(err, status.ErrConnLost):
			lost = err
		}
	}
	var got string
	require.Eventually(t, func() bool {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: &got})
		return err == nil
	}, testTimeout, time.Millisecond, "answered on the new connection")
	require.Equal(t, "hi", got)
	require.NotZero(t, timeouts)
	require.Error(t, lost, "calls behind the stalled reply ended the connection")
	require.ErrorContains(t, lost, "provider 127.0.0.1:"+strconv.Itoa(u.Port)+" sent 0 bytes of a response's body and nothing more for at least")
	require.Equal(t, int32(2), accepted.Load())
}

// TestShortTimeoutsDoNotCutAReplySooner: calls of 100 ms time out behind a
// reply that stopped, but the connection is closed for it only after a
// tenth of FrameTimeout (6 s here) without a byte, not after two of the
// calls' timeouts: a short call timeout must not cut an honest reply
// held up by one retransmission. For a second of calls the connection
// stays open and every call ends by its own timeout.
func TestShortTimeoutsDoNotCutAReplySooner(t *testing.T) {
	ctx := testCtx(t)
	u, accepted := stallingProvider(t) // 100 ms calls
	cli := newProtocol(t, &dubbo.Options{FrameTimeout: testTimeout, Reconnect: 10 * time.Millisecond})
	inv := refer(t, cli, u)
	start := time.Now()
	calls := 0
	for time.Since(start) < time.Second {
		require.Less(t, calls, 50, "calls ended sooner than their 100 ms timeout")
		calls++
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
		var te *status.TimeoutError
		require.True(t, errors.As(err, &te), "call %d: want its own timeout, got %v", calls, err)
	}
	require.GreaterOrEqual(t, calls, 3)
	require.Equal(t, int32(1), accepted.Load(), "the connection was not closed")
}
