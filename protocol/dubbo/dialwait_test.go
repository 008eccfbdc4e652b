package dubbo_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
)

// silentPeer is a listener on 127.0.0.1 that accepts connections and
// never writes: a TLS client's handshake with it never ends.
type silentPeer struct {
	l        net.Listener
	accepted chan net.Conn // every accepted connection, in order
}

func startSilentPeer(t *testing.T) *silentPeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sp := &silentPeer{l: l, accepted: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			sp.accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(sp.accepted)
		for c := range sp.accepted {
			_ = c.Close()
		}
	})
	return sp
}

func (sp *silentPeer) addr() string { return sp.l.Addr().String() }

// connections returns how many connections were made to the peer before
// this call: it dials the peer itself and counts the connections accepted
// before its own (the kernel hands them to Accept in the order they were
// made).
func (sp *silentPeer) connections(t *testing.T) int {
	own, err := net.Dial("tcp", sp.addr())
	require.NoError(t, err)
	defer own.Close()
	n := 0
	for c := range sp.accepted {
		if c.RemoteAddr().String() == own.LocalAddr().String() {
			_ = c.Close()
			return n
		}
		_ = c.Close()
		n++
	}
	t.Fatal("the peer stopped accepting")
	return 0
}

// TestDeadlineDuringFirstDial: a call whose deadline passes while the
// first dial to its provider is still under way (here a TLS handshake
// with a peer that never answers) says that the deadline passed while
// connecting, to which address and after how long, and matches
// context.DeadlineExceeded; it still matches status.ErrClosed, the "not
// sent" class, so protocol.Retryable and the failover treat it as they
// did. A cancelled call says it was cancelled. Every call waits on the one
// dial: the peer sees one connection.
func TestDeadlineDuringFirstDial(t *testing.T) {
	ctx := testCtx(t)
	sp := startSilentPeer(t)
	u := protocol.NewURL("dubbo", "127.0.0.1", sp.l.Addr().(*net.TCPAddr).Port, "demo.Greeter", nil)
	cli := newProtocol(t, &dubbo.Options{DialTimeout: testTimeout, ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	inv := refer(t, cli, u)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := inv.Invoke(short, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, status.ErrClosed)
	require.NotErrorIs(t, err, status.ErrTimeout, "not sent, so not the class of a sent call that timed out")
	require.True(t, protocol.Retryable(err))
	require.Regexp(t, "^dubbo: the call's deadline passed while connecting to "+regexp.QuoteMeta(sp.addr())+
		` \(waited [0-9.]+m?s for the dial\); the request was not sent \(the dial goes on, for up to the dial timeout 1m0s`, err.Error())
	require.NotContains(t, err.Error(), "connection closed")

	// Through the cluster's failover: the same error, after the one attempt
	// the deadline left room for.
	c, err := cluster.New(cluster.NewStatic(inv), cluster.Options{})
	require.NoError(t, err)
	defer c.Close()
	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Invoke(short, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "attempt 1 on "+sp.addr()+": dubbo: the call's deadline passed while connecting to "+sp.addr())

	// A caller that cancels is told so.
	cancelled, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := inv.Invoke(cancelled, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
		errc <- err
	}()
	cancel()
	err = <-errc
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
	require.ErrorContains(t, err, "dubbo: the call was cancelled while connecting to "+sp.addr())

	require.Equal(t, 1, sp.connections(t), "one dial for every call")
}

// TestFirstDialBoundByCallTimeout: the call's own timeout (here the
// reference's, 50 ms) bounds its wait for the first connection as it bounds
// the rest of the call, whatever DialTimeout says: with a peer that never
// completes the handshake the call ends after its timeout, not the dial's,
// saying which setting ran out, to which address, and that the request was
// not sent (status.ErrClosed: the failover tries another provider). The
// dial goes on: a second call waits on the same dial, and the peer sees one
// connection. The README's "Errors and timeouts" says so.
func TestFirstDialBoundByCallTimeout(t *testing.T) {
	ctx := testCtx(t) // longer than the timeout: the timeout, not ctx, must end the wait
	sp := startSilentPeer(t)
	u := protocol.NewURL("dubbo", "127.0.0.1", sp.l.Addr().(*net.TCPAddr).Port, "demo.Greeter",
		map[string]string{protocol.KeyTimeout: "50", protocol.KeyTimeoutSource: "reference"})
	cli := newProtocol(t, &dubbo.Options{DialTimeout: testTimeout, ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	inv := refer(t, cli, u)
	for range 2 {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
		require.NoError(t, ctx.Err(), "the call's timeout did not end its wait for the dial")
		require.ErrorIs(t, err, status.ErrClosed)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, status.ErrDial, "the dial goes on")
		require.NotErrorIs(t, err, status.ErrTimeout, "not sent, so not the class of a sent call that timed out")
		require.True(t, protocol.Retryable(err))
		require.Regexp(t, "^dubbo: the call's timeout \\(50ms, reference timeout\\) ran out while connecting to "+
			regexp.QuoteMeta(sp.addr())+` \(waited [0-9.]+m?s for the dial\); the request was not sent \(the dial goes on, for up to the dial timeout 1m0s`,
			err.Error())
	}
	require.Equal(t, 1, sp.connections(t), "one dial for both calls")
}

// gatedPeer forwards each connection it accepts to target once delay has
// passed since the accept: a provider whose dial (a TLS handshake) takes at
// least delay.
func gatedPeer(t *testing.T, target string, delay time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				select {
				case <-time.After(delay): // the slow network this peer stands for
				case <-quit:
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				ended := 0
				select {
				case <-done:
					ended++
				case <-quit:
				}
				_ = c.Close()
				_ = up.Close()
				for ; ended < 2; ended++ { // both copies end before the test does
					<-done
				}
			})
		}
	})
	t.Cleanup(func() {
		close(quit)
		_ = l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestFirstDialSpendsCallTimeout: the wait for the first connection is
// part of the call's timeout: a call whose dial took at least 300 ms sends
// the provider what is left of its 60 s timeout, not all of it, and the
// provider's method sees that deadline (at most 59.7 s away).
func TestFirstDialSpendsCallTimeout(t *testing.T) {
	const delay = 300 * time.Millisecond
	ctx := testCtx(t)
	serverTLS, clientTLS := testcert.SelfSigned(t)
	srv := newProtocol(t, &dubbo.Options{ServerTLS: serverTLS})
	_, pu := export(t, srv, providerURL("demo.Greeter"))
	host, port, err := net.SplitHostPort(gatedPeer(t, pu.Address(), delay))
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)
	u := protocol.NewURL("dubbo", host, portN, "demo.Greeter", map[string]string{protocol.KeyTimeout: testTimeoutMillis})
	inv := refer(t, newProtocol(t, &dubbo.Options{ClientTLS: clientTLS}), u)

	res, err := inv.Invoke(context.WithoutCancel(ctx), &protocol.Invocation{Method: "Deadline"})
	require.NoError(t, err)
	left := time.Duration(res.Value.(int64)) * time.Millisecond
	require.Positive(t, left)
	require.LessOrEqual(t, left, testTimeout-delay, "the provider was given the whole timeout after a wait of at least %v", delay)
}
