package exchange_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
)

// waitLed waits until n calls of c have read the connection: a call's
// request reaches the provider before its caller starts to read.
func waitLed(t *testing.T, c *exchange.Client, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return c.Led() >= n }, 5*time.Second, 100*time.Microsecond)
	require.Equal(t, n, c.Led())
}

// warmClient is how the tests of the reading role begin: with the role
// kept free between calls (KeepRoleFree), it dials addr (an echo
// provider or a scripted peer) and makes one call, so that the next call
// finds the role free and reads. It returns the test's context and the
// client.
func warmClient(t *testing.T, addr string, opts *exchange.Options) (context.Context, *exchange.Client) {
	t.Helper()
	exchange.KeepRoleFree(t)
	ctx := testCtx(t)
	c := dial(t, addr, opts)
	_, err := call(ctx, c, "warm")
	require.NoError(t, err)
	return ctx, c
}

// Sequential calls read their own responses: the first waits for the
// connection's read loop, which then leaves the role free, and every
// later one finds it free and reads.
func TestLoneCallsReadTheirResponses(t *testing.T) {
	exchange.KeepRoleFree(t)
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	const n = 20
	for i := range n {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
	}
	require.Equal(t, uint64(n-1), c.Led(), "every call but the first read its own response")
	require.Zero(t, c.Stops())
	require.Zero(t, c.Pending())
}

// A caller that reads (its call blocked on the provider) reads the
// responses of the calls made meanwhile and hands them out: they all end
// while it still waits. Its own ends when the provider answers, and the
// role is free again for the next call.
func TestCallsEndWhileOneReads(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, nil)
	ctx, c := warmClient(t, addr, nil)
	require.Zero(t, c.Led())

	reader := make(chan error, 1)
	go func() { reader <- echoes(ctx, c, "block") }()
	<-h.started
	waitLed(t, c, 1) // the blocked call reads

	echoFromMany(t, ctx, []*exchange.Client{c}, 16, 10)
	require.Equal(t, uint64(1), c.Led(), "the others waited for the reading caller to hand them out")
	require.Equal(t, 1, c.Pending(), "only the blocked call waits")

	close(h.release)
	require.NoError(t, <-reader)
	got, err := call(ctx, c, "after")
	require.NoError(t, err)
	require.Equal(t, "after", got)
	require.Equal(t, uint64(2), c.Led(), "the role was free again")
	require.Zero(t, c.Stops())
}

// A reading caller whose deadline passes stops reading and hands the role
// to the standby goroutine, which reads the response of a call still
// waiting; the late response of the first is counted late, and the role
// is free again afterwards.
func TestReadingCallTimesOut(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, nil)
	ctx, c := warmClient(t, addr, nil)

	_, err := c.Call(ctx, 50*time.Millisecond, 27, request("block")) // reads, then times out
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, uint64(1), c.Led())
	require.Equal(t, uint64(1), c.Stops(), "its deadline stopped its reading")
	<-h.started

	// The role is free again: this one reads, and waits for the provider.
	other := make(chan error, 1)
	go func() { other <- echoes(ctx, c, "block") }()
	<-h.started
	waitLed(t, c, 2)
	// A third call, reading nothing itself, times out while the second reads.
	_, err = c.Call(ctx, 20*time.Millisecond, 27, request("block"))
	require.ErrorAs(t, err, &te)
	<-h.started
	require.Equal(t, uint64(2), c.Led())

	close(h.release)
	require.NoError(t, <-other)
	// The responses of the calls that timed out are read by whoever
	// reads next: with no standby ticks, the next call.
	require.Eventually(t, func() bool {
		got, err := call(ctx, c, "next")
		return err == nil && got == "next" && c.Late() == 2
	}, 5*time.Second, time.Millisecond)
	require.Zero(t, c.Pending())
}

// A reading caller that times out while another call waits hands the
// role on to the standby goroutine, which reads the other's response.
func TestTimedOutReaderHandsOn(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, nil)
	ctx, c := warmClient(t, addr, nil)

	first := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, 300*time.Millisecond, 27, request("block"))
		first <- err
	}()
	<-h.started
	waitLed(t, c, 1)
	second := c.Go(ctx, 0, 27, request("block")) // waits; reads nothing
	<-h.started
	var te *status.TimeoutError
	require.ErrorAs(t, <-first, &te)
	require.Equal(t, uint64(1), c.Stops())

	close(h.release)
	<-second.Done()
	resp, err := second.Result()
	require.NoError(t, err, "the standby goroutine read it")
	require.Equal(t, "block", string(exchange.Body(resp)))
	resp.Release()
}

// A reading caller whose context is cancelled returns with the context's
// error (the standby goroutine sees the context end at its next tick);
// the role passes on and later calls work.
func TestReadingCallCancelled(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, nil)
	ctx, c := warmClient(t, addr, nil)

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := call(cctx, c, "block")
		errc <- err
	}()
	<-h.started
	waitLed(t, c, 1)
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, status.ErrTimeout)
	require.Equal(t, uint64(1), c.Stops())

	close(h.release)
	for i := range 5 {
		got, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
	}
	require.Equal(t, uint64(1), c.Late(), "the cancelled call's response")
	require.Equal(t, uint64(6), c.Led())
}

// Close while a caller reads ends its call with ErrClosed; nothing is
// left running (goleak).
func TestCloseWhileCallerReads(t *testing.T) {
	h := newEcho()
	_, addr := serve(t, h, nil)
	ctx, c := warmClient(t, addr, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, "block")
		errc <- err
	}()
	<-h.started
	waitLed(t, c, 1)
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-errc, status.ErrClosed)
	close(h.release)
}

// onePeer accepts one connection, answers the first n requests (echoing
// their bodies) and then closes it, or at once after reading the next
// request when after is true. It returns its address.
func onePeer(t *testing.T, n int, after bool) string {
	reads := n
	if after {
		reads++
	}
	return scriptedPeer(t, reads, false, func(i int, out exchange.Header, body []byte) []byte {
		if i == n {
			return nil // read, not answered
		}
		return peerFrame(out, body)
	})
}

// scriptedPeer accepts one connection and reads up to reads requests
// from it; to each it writes what answer returns for it (i from 0; out is
// a response header with the request's serializer and ID, status OK and
// the request body's length): nothing when nil. After the last it closes
// the connection, or, when hold, keeps it open, sending nothing more,
// until the test ends. It returns its address.
func scriptedPeer(t *testing.T, reads int, hold bool, answer func(i int, out exchange.Header, body []byte) []byte) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		for i := range reads {
			h, body, err := readFrame(nc)
			if err != nil {
				return
			}
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(len(body))}
			if b := answer(i, out, body); b != nil {
				if _, err := nc.Write(b); err != nil {
					return
				}
			}
		}
		if hold {
			<-stop
		}
	}()
	t.Cleanup(func() {
		close(stop)
		l.Close()
		<-done
	})
	return l.Addr().String()
}

// peerFrame is a frame of header h and body.
func peerFrame(h exchange.Header, body []byte) []byte {
	var oh [exchange.HeaderSize]byte
	h.Put(oh[:])
	return append(oh[:], body...)
}

// A provider that closes the connection while a caller reads: the call
// ends with ErrConnLost.
func TestConnectionLostWhileCallerReads(t *testing.T) {
	ctx, c := warmClient(t, onePeer(t, 1, true), nil)
	_, err := call(ctx, c, "unanswered")
	require.ErrorIs(t, err, status.ErrConnLost)
	require.Equal(t, uint64(1), c.Led())
	<-c.Done()
}

// A provider that closes an idle connection whose role callers left free:
// the standby goroutine reads the end within its ticks, with no call.
func TestFreeRoleWatched(t *testing.T) {
	ctx := testCtx(t)
	c := dial(t, onePeer(t, 2, false), nil)
	for i := range 2 {
		_, err := call(ctx, c, fmt.Sprint(i))
		require.NoError(t, err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the end of an idle connection was not read")
	}
	require.ErrorIs(t, c.Err(), status.ErrClosed)
}

// An asynchronous call that finds the role free hands it to the standby
// goroutine, which reads its response.
func TestFutureWithFreeRole(t *testing.T) {
	_, addr := serve(t, newEcho(), nil)
	ctx, c := warmClient(t, addr, nil)
	for i := range 3 {
		f := c.Go(ctx, 0, 27, request(fmt.Sprint(i)))
		resp, err := f.Result()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(exchange.Body(resp)))
		resp.Release()
		got, err := call(ctx, c, "sync")
		require.NoError(t, err)
		require.Equal(t, "sync", got)
	}
	require.Zero(t, c.Pending())
}
