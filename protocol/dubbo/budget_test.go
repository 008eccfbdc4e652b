package dubbo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
)

// TestBudgetGivenBackAfterCalls: every kind of call (answers, errors, a
// panic, large arguments and answers, an argument the method keeps, a call
// that times out on the consumer) gives back what its frames were charged
// to the provider's memory budget: once they are done, Stats.MemoryHeld is
// zero. A path that dropped a request or an answer without releasing it
// would hold its bytes of the budget for good.
func TestBudgetGivenBackAfterCalls(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	// Calls may take the test's time: 100 at once take over a second
	// under -race on a loaded machine (the default timeout is 1 s).
	g, u := export(t, srv, providerURL("demo.Greeter", protocol.KeyTimeout, testTimeoutMillis))
	inv := refer(t, newProtocol(t, nil), u)
	do := func(method string, args ...any) error {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: method, Args: args})
		return err
	}
	require.NoError(t, do("SayHello", "world"))
	require.NoError(t, do("Add", 1, 2))
	require.NoError(t, do("Greet", Person{Name: "ann"}))
	require.Error(t, do("Fail", "cat"))
	require.Error(t, do("Panic"))
	require.Error(t, do("NoSuchMethod"))
	require.NoError(t, do("Nothing"))
	require.NoError(t, do("Attach", "k"))
	require.NoError(t, do("Big", 1<<20))
	require.NoError(t, do("Bytes", make([]byte, 1<<20)))
	require.NoError(t, do("Keep", []byte("kept")))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := inv.Invoke(short, &protocol.Invocation{Method: "Block"})
	cancel()
	require.Error(t, err)
	close(g.release)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{make([]byte, i<<10)}})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return srv.Stats().MemoryHeld == 0 }, testTimeout, time.Millisecond,
		"memory held after the calls")
	require.Zero(t, srv.Stats().Throttled)
}

// TestBudgetSharedByPorts: the exported ports of a Protocol share one
// memory budget (Options.MaxMemory): a peer stalled within a 1 MiB call on
// one port and another on a second port do not both fit in 1.5 MiB, so the
// second port stops reading the second peer (Stats.Throttled) while the
// first holds its call (Stats.MemoryHeld); a consumer's small calls are
// answered meanwhile, and its 600 KiB call once the stalled peers are gone.
func TestBudgetSharedByPorts(t *testing.T) {
	ctx := testCtx(t)
	// The stalled peers stall for longer than a tenth of FrameTimeout
	// when the machine is slow: the budget would close them then
	// (TestBudgetReclaimsStalledCall).
	// Every peer comes from 127.0.0.1: no bound per address.
	srv := newProtocol(t, &dubbo.Options{MaxMemory: 3 << 19, MaxMemoryPerIP: 3 << 19, MaxPayload: 1 << 20, FrameTimeout: 10 * time.Minute})
	_, u1 := export(t, srv, providerURL("demo.One"))
	_, u2 := export(t, srv, providerURL("demo.Two", protocol.KeyTimeout, testTimeoutMillis))
	require.NotEqual(t, u1.Port, u2.Port)

	const body = 1 << 20
	start := make([]byte, exchange.HeaderSize, exchange.HeaderSize+100)
	h := exchange.Header{Request: true, TwoWay: true, Serializer: 2, ID: 1, Length: body}
	h.Put(start)
	start = append(start, make([]byte, 100)...)
	stall := func(u *protocol.URL) net.Conn {
		c, err := net.Dial("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = c.Write(start)
		require.NoError(t, err)
		return c
	}
	s1 := stall(u1)
	require.Eventually(t, func() bool { return srv.Stats().MemoryHeld == exchange.HeaderSize+body }, testTimeout, time.Millisecond)
	s2 := stall(u2)
	require.Eventually(t, func() bool { return srv.Stats().Throttled == 1 }, testTimeout, time.Millisecond)
	require.Equal(t, exchange.HeaderSize+body, srv.Stats().MemoryHeld)

	inv := refer(t, newProtocol(t, nil), u2)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"meanwhile"}})
	require.NoError(t, err)
	require.Equal(t, "hello meanwhile", res.Value)
	done := make(chan error, 1)
	arg := []byte(strings.Repeat("b", 600<<10))
	go func() {
		res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{arg}})
		if err == nil && fmt.Sprintf("%s", res.Value) != string(arg) {
			err = errors.New("the answer is not the bytes sent")
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return srv.Stats().Throttled == 2 }, testTimeout, time.Millisecond)
	s1.Close()
	s2.Close()
	require.NoError(t, <-done)
	require.Eventually(t, func() bool { return srv.Stats().MemoryHeld == 0 }, testTimeout, time.Millisecond)
}

// TestBudgetReclaimsStalledCall: a peer sends the header of a 1 MiB call
// and nothing more; its declared length holds the 1.5 MiB budget so that
// a consumer's 600 KiB call waits. While it waits, the stalled call falls
// far behind the pace of its FrameTimeout (1 MiB per 2 s, after 200 ms),
// so the budget closes that peer (Stats.Reclaimed) and the consumer's
// call is answered, before the stalled call's FrameTimeout.
func TestBudgetReclaimsStalledCall(t *testing.T) {
	ctx := testCtx(t)
	// Every peer comes from 127.0.0.1: no bound per address.
	srv := newProtocol(t, &dubbo.Options{MaxMemory: 3 << 19, MaxMemoryPerIP: 3 << 19, MaxPayload: 1 << 20, FrameTimeout: 2 * time.Second})
	_, u := export(t, srv, providerURL("demo.One", protocol.KeyTimeout, testTimeoutMillis))
	const body = 1 << 20
	start := make([]byte, exchange.HeaderSize)
	h := exchange.Header{Request: true, TwoWay: true, Serializer: 2, ID: 1, Length: body}
	h.Put(start)
	c, err := net.Dial("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(start)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.Stats().MemoryHeld == exchange.HeaderSize+body }, testTimeout, time.Millisecond)

	inv := refer(t, newProtocol(t, nil), u)
	arg := []byte(strings.Repeat("b", 600<<10))
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{arg}})
	require.NoError(t, err)
	require.Equal(t, string(arg), fmt.Sprintf("%s", res.Value))
	require.Equal(t, uint64(1), srv.Stats().Throttled)
	// Counted just after the close, which can be after the answer.
	require.Eventually(t, func() bool { return srv.Stats().Reclaimed == 1 }, testTimeout, time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the stalled peer's connection is closed")
	require.Eventually(t, func() bool { return srv.Stats().MemoryHeld == 0 }, testTimeout, time.Millisecond)
}

// TestBudgetBoundPerIP: two strangers at 127.0.0.2 each send the header of
// a 1 MiB call and 100 bytes of it. The calls in progress from one
// address may hold Options.MaxMemoryPerIP (1 MiB here) of the 8 MiB
// budget: the first is read, the second waits unread (Stats.ThrottledByIP)
// and holds nothing, and a consumer at 127.0.0.1 is answered without
// waiting for memory (Stats.Throttled stays zero).
func TestBudgetBoundPerIP(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, &dubbo.Options{MaxMemory: 8 << 20, MaxMemoryPerIP: 1 << 20, MaxPayload: 1 << 20, FrameTimeout: 10 * time.Minute})
	_, u := export(t, srv, providerURL("demo.One", protocol.KeyTimeout, testTimeoutMillis))
	const body = 1 << 20
	start := make([]byte, exchange.HeaderSize, exchange.HeaderSize+100)
	h := exchange.Header{Request: true, TwoWay: true, Serializer: 2, ID: 1, Length: body}
	h.Put(start)
	start = append(start, make([]byte, 100)...)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
	for range 2 {
		c, err := d.Dial("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write(start)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return srv.Stats().ThrottledByIP == 1 }, testTimeout, time.Millisecond)
	require.Equal(t, exchange.HeaderSize+body, srv.Stats().MemoryHeld, "only the first call is charged")

	inv := refer(t, newProtocol(t, nil), u)
	arg := []byte(strings.Repeat("b", 600<<10))
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{arg}})
	require.NoError(t, err)
	require.Equal(t, string(arg), fmt.Sprintf("%s", res.Value))
	require.Zero(t, srv.Stats().Throttled)
	require.Equal(t, uint64(1), srv.Stats().ThrottledByIP)
}
