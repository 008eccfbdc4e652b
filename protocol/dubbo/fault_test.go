package dubbo_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/status"
)

// freezer is a TCP proxy that can stop forwarding while keeping its
// connections open, like a provider host that froze.
type freezer struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezer(t *testing.T, target string) *freezer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &freezer{l: l, target: target, thaw: make(chan struct{})}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *freezer) addr() string { return f.l.Addr().String() }

func (f *freezer) accept() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, b)
		f.mu.Unlock()
		f.wg.Go(func() { f.pipe(b, c) })
		f.wg.Go(func() { f.pipe(c, b) })
	}
}

// pipe copies src to dst, holding each chunk while the proxy is frozen.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		f.mu.Lock()
		frozen, thaw := f.frozen, f.thaw
		f.mu.Unlock()
		if frozen {
			<-thaw
			continue // a frozen host's traffic is lost
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

func (f *freezer) unfreeze() {
	f.mu.Lock()
	if f.frozen {
		f.frozen = false
		close(f.thaw)
		f.thaw = make(chan struct{})
	}
	f.mu.Unlock()
}

func (f *freezer) close() {
	f.unfreeze()
	f.l.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// TestFrozenProviderDetected: a provider that stops answering (its host
// froze, the TCP connection stays open) is found dead by the heartbeat;
// every pending call fails with ErrConnLost long before its timeout, the
// invoker reports unavailable, and it reconnects when the host is back.
func TestFrozenProviderDetected(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	_, u := export(t, srv, providerURL("demo.Greeter"))
	f := newFreezer(t, u.Address())
	host, port, err := net.SplitHostPort(f.addr())
	require.NoError(t, err)
	pu, err := protocol.ParseURL("dubbo://" + net.JoinHostPort(host, port) + "/demo.Greeter?timeout=10000")
	require.NoError(t, err)
	// The first re-dial waits a second, so that the lost connection is seen
	// unavailable before a new one is made (the proxy accepts even frozen).
	cli := newProtocol(t, &dubbo.Options{Heartbeat: 100 * time.Millisecond, Reconnect: time.Second})
	inv := refer(t, cli, pu)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)

	f.freeze()
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"lost"}})
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		require.ErrorIs(t, err, status.ErrConnLost)
		require.True(t, protocol.Retryable(err))
	}
	require.False(t, protocol.IsAvailable(inv))

	f.unfreeze()
	require.Eventually(t, func() bool { return protocol.IsAvailable(inv) }, 5*time.Second, time.Millisecond)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"back"}})
	require.NoError(t, err)
	require.Equal(t, "hello back", res.Value)
}
