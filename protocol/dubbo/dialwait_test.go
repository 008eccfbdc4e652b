package dubbo_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
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

// TestFirstDialNotBoundByCallTimeout: the first call to a provider waits
// for the connection up to DialTimeout whatever its URL timeout (only a
// context deadline ends that wait sooner, TestDeadlineDuringFirstDial):
// with a 50 ms timeout and a peer that never completes the handshake, the
// call ends when the dial does, "dial failed", not a timeout. The README's
// "Errors and timeouts" says so.
func TestFirstDialNotBoundByCallTimeout(t *testing.T) {
	sp := startSilentPeer(t)
	u := protocol.NewURL("dubbo", "127.0.0.1", sp.l.Addr().(*net.TCPAddr).Port, "demo.Greeter",
		map[string]string{protocol.KeyTimeout: "50"})
	cli := newProtocol(t, &dubbo.Options{DialTimeout: 500 * time.Millisecond, ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	inv := refer(t, cli, u)
	_, err := inv.Invoke(context.Background(), &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrDial)
	require.NotErrorIs(t, err, status.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the dial's own deadline: %v", err)
	require.ErrorContains(t, err, "(not connected within the dial timeout 500ms, dubbo.Options.DialTimeout)")
	require.Equal(t, 1, sp.connections(t))
}
