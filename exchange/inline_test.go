package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/status"
)

// A call alone on its connection writes its own request; a call made
// while another waits for its response leaves its request to the
// connection's writer.
func TestLoneCallWritesItsRequest(t *testing.T) {
	ctx := testCtx(t)
	h := newEcho()
	_, addr := serve(t, h, nil)
	c := dial(t, addr, nil)
	for i := range 5 {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
		require.Equal(t, uint64(i+1), c.Inline(), "each sequential call wrote its own request")
	}

	blocked := c.Go(ctx, 0, 27, request("block"))
	<-h.started
	require.Equal(t, uint64(6), c.Inline(), "alone when sent")
	for i := range 5 {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
	}
	require.Equal(t, uint64(6), c.Inline(), "with a call in flight requests go to the writer")
	close(h.release)
	<-blocked.Done()
	resp, err := blocked.Result()
	require.NoError(t, err)
	resp.Release()
}

// Calls from many goroutines, some alone on the connection (writing their
// requests themselves, large ones in part) and some not (through the
// writer): every response matches its request.
func TestInlineAndQueuedRequestsMixed(t *testing.T) {
	// Longer than testCtx: megabytes under the race detector on a busy
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	const callers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				want := fmt.Sprintf("%d/%d/", g, i)
				if i%7 == 3 {
					want += strings.Repeat("x", 64<<10+g*1000+i)
				}
				got, err := call(ctx, c, want)
				if err == nil && got != want {
					err = fmt.Errorf("call %d/%d: got %d bytes %.20q, want %d bytes %.20q", g, i, len(got), got, len(want), want)
				}
				if err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					time.Sleep(time.Duration(g) * 100 * time.Microsecond) // spread the callers
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Lone calls, then the writer again.
	for i := range 2 {
		want := fmt.Sprint(i) + strings.Repeat("y", 4<<20) // written in part
		got, err := call(ctx, c, want)
		require.NoError(t, err)
		require.True(t, got == want)
	}
	inline := c.Inline()
	require.NotZero(t, inline)
	require.Less(t, inline, uint64(callers*each+2), "some requests went through the writer")
	t.Logf("%d of %d requests written by their callers", inline, callers*each+2)
}

// stuckPeer accepts connections and never reads from them; it returns its
// address.
func stuckPeer(t *testing.T) string {
	return fakepeer.Listen(t, nil).String()
}

// A lone call to a provider that stops reading does not block in its
// write: the socket takes part of the request, the writer the rest, and
// the call ends at its timeout; so does the next one, whose request waits
// behind it.
func TestLoneCallToStuckPeerTimesOut(t *testing.T) {
	// Longer than testCtx: the calls must end by their own timeout, and
	// under load building and copying 24 MiB requests under the race
	// detector took testCtx's 10 s; both calls then ended "after 0s"
	// without a byte written (Inline() 0).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dial(t, stuckPeer(t), &exchange.Options{MaxPayload: 32 << 20})
	body := strings.Repeat("z", 24<<20) // more than loopback's socket buffers take
	var errs [2]error
	for i := range 2 {
		f := request(body)
		start := time.Now()
		resp, err := c.Call(ctx, 200*time.Millisecond, 27, f)
		took := time.Since(start)
		require.Nil(t, resp)
		var te *status.TimeoutError
		require.ErrorAs(t, err, &te, "call %d", i)
		require.Equal(t, 200*time.Millisecond, te.Timeout, "call %d ended by the test's context, not its own timeout: %v", i, err)
		// Bounded, not measured: a call blocked in its write would stay
		// there until the test's deadline.
		require.Less(t, took, 5*time.Second, "call %d", i)
		t.Logf("call %d: %v after %v", i, err, took)
		errs[i] = err
	}
	// 1: the first call wrote its request itself (the socket took part,
	// the writer has the rest) and the second found that rest being
	// written. 0: the first was not written by its caller; 2: the second
	// was, so the first's rest was no longer queued.
	require.Equal(t, uint64(1), c.Inline(),
		"Inline() counts the requests written by their callers; want the first only (errors: %v; %v)", errs[0], errs[1])
}

// A connection that the peer closes while lone calls write their large
// requests: every call ends, with an error that says the connection is
// gone, and nothing is left running (goleak).
func TestConnectionLostDuringInlineWrite(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		// Read some of the first request, then reset the connection.
		_, _ = io.CopyN(io.Discard, nc, 100<<10)
		_ = nc.(*net.TCPConn).SetLinger(0)
		nc.Close()
	}()
	c := dial(t, l.Addr().String(), &exchange.Options{MaxPayload: 32 << 20})
	body := strings.Repeat("w", 8<<20)
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "the connection's loss reached no call")
		_, err := c.Call(ctx, 5*time.Second, 27, request(body))
		require.Error(t, err)
		if errors.Is(err, status.ErrClosed) || errors.Is(err, status.ErrConnLost) {
			if c.Err() != nil {
				break
			}
		}
	}
	require.NotZero(t, c.Inline())
}

// Close while a lone call writes a large request: the call ends with an
// error, Close returns, nothing leaks.
func TestCloseDuringInlineWrite(t *testing.T) {
	// Longer than testCtx, as in TestLoneCallToStuckPeerTimesOut: under
	// load the call could start after testCtx's 10 s and end at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dial(t, stuckPeer(t), &exchange.Options{MaxPayload: 32 << 20})
	body := strings.Repeat("v", 24<<20)
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, 0, 27, request(body))
		done <- err
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for c.Inline() != 1 {
		select {
		case err := <-done:
			t.Fatalf("the call ended before its caller wrote its request: %v (Inline() %d)", err, c.Inline())
		case <-ctx.Done():
			t.Fatalf("the call's caller never wrote its request (Inline() %d)", c.Inline())
		case <-tick.C:
		}
	}
	require.NoError(t, c.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, status.ErrClosed)
	case <-ctx.Done():
		t.Fatal("the call did not end with Close")
	}
	_, err := c.Call(context.Background(), 0, 27, request("after"))
	require.ErrorIs(t, err, status.ErrClosed)
}

// BenchmarkCallers is calls over one connection to an echo server in this
// process, with 1 and 16 concurrent callers (581-byte bodies); inline/op is
// the share of requests their callers wrote themselves (alone on the
// connection), the rest went through the connection's writer; led/op the
// share of calls whose callers read their own responses (the reading role
// found free, lead.go).
func BenchmarkCallers(b *testing.B) {
	_, addr := serve(b, newEcho(), nil)
	body := strings.Repeat("p", 581)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", n), func(b *testing.B) {
			c := dial(b, addr, nil)
			ctx := context.Background()
			one := func() {
				resp, err := c.Call(ctx, 0, 27, request(body))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Release()
			}
			b.ReportAllocs()
			b.SetParallelism(max(n/runtime.GOMAXPROCS(0), 1))
			start, led0 := c.Inline(), c.Led()
			b.ResetTimer()
			if n == 1 {
				for b.Loop() {
					one()
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
			}
			b.ReportMetric(float64(c.Inline()-start)/float64(b.N), "inline/op")
			b.ReportMetric(float64(c.Led()-led0)/float64(b.N), "led/op")
		})
	}
}
