package dubbo_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// gate relays TCP connections to a provider with one direction shut
// (nothing read from its source) until open: the consumer's requests
// (startGate) or the provider's replies (startHoldReplies). The shut
// direction's source socket gets a small read buffer, so that what it
// holds back soon stops its writer.
type gate struct {
	l      net.Listener
	openCh chan struct{}
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startGate holds the consumer-to-provider direction, with a 64 KiB
// window: the consumer's writes stop soon.
func startGate(t *testing.T, target string) *gate {
	return startRelay(t, target, true, 64<<10)
}

// startHoldReplies holds the provider-to-consumer direction, with a
// 16 KiB window, so that replies wait in the provider.
func startHoldReplies(t *testing.T, target *protocol.URL) *gate {
	return startRelay(t, target.Address(), false, 16<<10)
}

// startRelay relays to target, holding the requests when holdRequests,
// else the replies, until open; the held direction's source socket reads
// into a buffer of window bytes.
func startRelay(t *testing.T, target string, holdRequests bool, window int) *gate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{l: l, openCh: make(chan struct{})}
	g.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			// src -> dst is held until open; dst -> src runs at once.
			src, dst := net.Conn(c), p
			if !holdRequests {
				src, dst = p, c
			}
			_ = src.(*net.TCPConn).SetReadBuffer(window)
			g.mu.Lock()
			g.conns = append(g.conns, c, p)
			g.mu.Unlock()
			g.wg.Go(func() {
				_, _ = io.Copy(src, dst)
				src.Close()
			})
			g.wg.Go(func() {
				<-g.openCh
				_, _ = io.Copy(dst, src)
				dst.Close()
			})
		}
	})
	t.Cleanup(func() {
		g.open()
		l.Close()
		g.mu.Lock()
		for _, c := range g.conns {
			c.Close()
		}
		g.mu.Unlock()
		g.wg.Wait()
	})
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.openCh) }) }

func (g *gate) url(u *protocol.URL) *protocol.URL {
	return protocol.NewURL("dubbo", "127.0.0.1", g.l.Addr().(*net.TCPAddr).Port, u.Path, u.Params())
}

// TestArgumentsNotReadAfterCallReturns: large []byte and string arguments
// are written from the caller's memory, and a call that returns early (its
// timeout, its context cancelled) while its request is still queued or
// being written gives that memory back: the caller overwrites it at once,
// and the provider gets every argument it gets with the bytes the caller
// passed (or, for a request withdrawn unsent, nothing), never the ones
// written after the call returned; the calls behind find the connection
// intact. A provider behind a gate that reads nothing keeps the requests
// queued: first one of 6 MiB that the consumer's writer starts and cannot
// finish, then 16 KiB ones behind it.
func TestArgumentsNotReadAfterCallReturns(t *testing.T) {
	srv := newProtocol(t, nil)
	g, u := export(t, srv, providerURL("demo.Lend"))
	defer close(g.release)
	gt := startGate(t, u.Address())
	cli := newProtocol(t, nil)
	inv := refer(t, cli, gt.url(u).With(protocol.KeyTimeout, "30000"))
	ctx := testCtx(t)
	// The connection first: a call whose deadline passes while the first
	// dial is under way fails "deadline passed while connecting" (status.ErrClosed),
	// not with a timeout, and its request is never written. Under -race at
	// load 20 the dial took over the small calls' 100 ms. A probe that
	// times out had the connection (its request, if sent, waits in the gate
	// and answers nothing the test counts).
	for {
		probe, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := inv.Invoke(probe, &protocol.Invocation{Method: "Nothing"})
		cancel()
		if errors.Is(err, status.ErrTimeout) {
			break
		}
		require.ErrorIs(t, err, status.ErrClosed, "probe")
		require.NoError(t, ctx.Err(), "no connection through the gate")
	}

	big := bytes.Repeat([]byte{'b'}, 6<<20)
	bigDone := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := inv.Invoke(short, &protocol.Invocation{Method: "Keep", Args: []any{big}})
		for i := range big {
			big[i] = 'X' // the caller's again
		}
		bigDone <- err
	}()

	const small = 16 << 10
	var sent []string
	for i := range 6 {
		arg := bytes.Repeat([]byte{byte('c' + i)}, small)
		sent = append(sent, string(arg))
		callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cancelled := i%2 == 1
		if cancelled {
			callCtx, cancel = context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, cancel)
		}
		_, err := inv.Invoke(callCtx, &protocol.Invocation{Method: "Keep", Args: []any{arg}})
		cancel()
		if cancelled {
			require.ErrorIs(t, err, context.Canceled, "call %d", i)
		} else {
			require.ErrorIs(t, err, status.ErrTimeout, "call %d", i)
		}
		for j := range arg {
			arg[j] = 'X'
		}
	}
	require.ErrorIs(t, <-bigDone, status.ErrTimeout)

	// The provider reads at last; the calls behind work on the same
	// connection, large arguments and small, []byte and string.
	gt.open()
	for _, size := range []int{10, 581, 4 << 10, 16 << 10, 1 << 20} {
		arg := bytes.Repeat([]byte{'n'}, size)
		var reply []byte
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Bytes", Args: []any{arg}, Reply: &reply})
		require.NoError(t, err)
		require.True(t, bytes.Equal(arg, reply), "%d bytes", size)
		s := strings.Repeat("s", size)
		var sreply string
		_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{s}, Reply: &sreply})
		require.NoError(t, err)
		require.Equal(t, "hello "+s, sreply)
	}
	// The 6 MiB request was being written when its call ended: it arrives
	// whole, with the bytes it was called with.
	require.Eventually(t, func() bool {
		g.keptMu.Lock()
		defer g.keptMu.Unlock()
		for _, k := range g.kept {
			if len(k) == len(big) {
				return true
			}
		}
		return false
	}, testTimeout, time.Millisecond, "the request being written when its call ended never arrived")

	g.keptMu.Lock()
	defer g.keptMu.Unlock()
	for _, k := range g.kept {
		assert.Zero(t, bytes.Count(k, []byte{'X'}), "an argument of %d bytes overwritten after its call returned reached the provider", len(k))
		if len(k) == len(big) {
			assert.Equal(t, len(big), bytes.Count(k, []byte{'b'}))
			continue
		}
		assert.True(t, slices.Contains(sent, string(k)), "an argument of %d bytes that was not sent reached the provider", len(k))
	}
	t.Logf("of the %d requests queued behind the one being written, %d arrived, the others were withdrawn", len(sent), len(g.kept)-1)
}
