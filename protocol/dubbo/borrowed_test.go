package dubbo_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
)

// lentPayload returns n bytes (n >= 8) whose content follows from seed: the
// seed, then bytes derived from it and their position, so that a buffer
// reused for another request (another seed) shows.
func lentPayload(seed uint64, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, seed)
	for i := 8; i < n; i++ {
		b[i] = byte(seed*31 + uint64(i)*7)
	}
	return b
}

// checkLentPayload reports whether b is a payload of its own seed and of
// length n.
func checkLentPayload(b []byte, n int) error {
	if len(b) != n {
		return fmt.Errorf("%d bytes, want %d", len(b), n)
	}
	seed := binary.BigEndian.Uint64(b)
	for i := 8; i < n; i++ {
		if b[i] != byte(seed*31+uint64(i)*7) {
			return fmt.Errorf("byte %d of the payload of seed %d is %d: overwritten", i, seed, b[i])
		}
	}
	return nil
}

// lender borrows its arguments (service.Borrowed).
type lender struct {
	// barrier, when set, makes Echo wait, after it has checked its
	// argument, until as many calls have arrived as it holds (the
	// channel is closed by the last): their requests were read into
	// pooled buffers meanwhile. Then Echo checks its argument again.
	barrier chan struct{}
	want    int64
	arrived atomic.Int64
	done    atomic.Int64 // Echo calls returned
	doneCh  chan struct{}
	total   int64 // doneCh is closed when done reaches it
}

// Echo checks its argument, waits (barrier) or does other work, checks it
// again and returns it as its reply, which the provider writes from the
// request's own buffer.
func (l *lender) Echo(ctx context.Context, b service.Borrowed) ([]byte, error) {
	defer func() {
		if l.done.Add(1) == l.total && l.doneCh != nil {
			close(l.doneCh)
		}
	}()
	n := len(b)
	if err := checkLentPayload(b, n); err != nil {
		return nil, err
	}
	if l.barrier != nil {
		if l.arrived.Add(1) == l.want {
			close(l.barrier)
		}
		select {
		case <-l.barrier:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		// Other work: garbage and yields, so that other requests are
		// read and answered meanwhile.
		var junk [][]byte
		for i := range 4 {
			junk = append(junk, make([]byte, 1024*(i+1)))
			runtime.Gosched()
		}
		runtime.KeepAlive(junk)
	}
	if err := checkLentPayload(b, n); err != nil {
		return nil, fmt.Errorf("after waiting: %w", err)
	}
	return b, nil
}

// Sum borrows its argument and does not return it.
func (l *lender) Sum(_ context.Context, b service.Borrowed) (int64, error) {
	var s int64
	for _, c := range b {
		s += int64(c)
	}
	return s, nil
}

// Put takes a key and a borrowed value (no direct call: two arguments)
// and answers with the key and the value's length and seed.
func (l *lender) Put(_ context.Context, key string, v service.Borrowed) (string, error) {
	if err := checkLentPayload(v, len(v)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%d:%d", key, len(v), binary.BigEndian.Uint64(v)), nil
}

// exportLender exports l through a proxy provider with the URL
// parameters params and returns the URL to refer.
func exportLender(t *testing.T, p interface {
	Export(protocol.Invoker) (protocol.Exporter, error)
}, l *lender, params ...string) *protocol.URL {
	prov, err := proxy.NewProvider(providerURL("demo.Lender", params...), l)
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	return exp.URL()
}

// TestBorrowedArgumentsUnderLoad: many concurrent calls over two
// connections, of sizes copied into the reply (small) and spliced into it
// (4 KiB and more, written from the request's buffer), and over the size
// of pooled buffers. Each method checks its argument, works, and checks
// it again; each consumer checks its reply. A request buffer that went
// back to the pool before the method returned or before the reply that
// refers to it was written would be read into again and show another
// payload. The calls' timeout is the test's: the 1 s default ended
// some under -race at load 20 (the test is about what arrives).
func TestBorrowedArgumentsUnderLoad(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		srv := newProtocol(t, nil)
		u := exportLender(t, srv, &lender{}, protocol.KeyTimeout, testTimeoutMillis)
		borrowUnderLoad(t, refer(t, newProtocol(t, &dubboOptions{Connections: 2}), u))
	})
	t.Run("tls", func(t *testing.T) {
		// TLS writes through a buffered writer, not writev.
		serverTLS, clientTLS := testcert.SelfSigned(t)
		srv := newProtocol(t, &dubboOptions{ServerTLS: serverTLS})
		u := exportLender(t, srv, &lender{}, protocol.KeyTimeout, testTimeoutMillis)
		borrowUnderLoad(t, refer(t, newProtocol(t, &dubboOptions{Connections: 2, ClientTLS: clientTLS}), u))
	})
}

func borrowUnderLoad(t *testing.T, inv protocol.Invoker) {
	ctx := testCtx(t)
	sizes := []int{8, 100, 4095, 4096, 5000, 16 << 10, 70 << 10}
	const goroutines, calls = 12, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				n := sizes[(g+i)%len(sizes)]
				seed := uint64(g*calls + i)
				arg := lentPayload(seed, n)
				var reply []byte
				method := "Echo"
				if i%5 == 4 {
					method = "Put"
				}
				var err error
				if method == "Echo" {
					_, err = inv.Invoke(ctx, &protocol.Invocation{Method: method, Args: []any{arg}, Reply: &reply})
					if err == nil && !bytes.Equal(reply, lentPayload(seed, n)) {
						err = fmt.Errorf("reply of %d bytes is not the argument: %v", n, checkLentPayload(reply, n))
					}
				} else {
					var s string
					_, err = inv.Invoke(ctx, &protocol.Invocation{Method: method, Args: []any{"k", arg}, Reply: &s})
					if want := fmt.Sprintf("k:%d:%d", n, seed); err == nil && s != want {
						err = fmt.Errorf("Put answered %q, want %q", s, want)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s of %d bytes (seed %d): %w", method, n, seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBorrowedReplyWaitsForItsWrite: every call's method has returned its
// borrowed argument as the reply while no reply can reach the consumer (a
// relay holds them back, with a small socket buffer, so the provider's
// writer holds most), and while the methods ran, all the other requests
// were read; then other requests are read. Only then are the replies
// let through: each must still be its request's payload.
func TestBorrowedReplyWaitsForItsWrite(t *testing.T) {
	ctx := testCtx(t)
	// No collection while the test runs: it would empty the pool of
	// buffers, and a buffer released too early would not be read into
	// again (the test would pass when it should fail).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// More replies than the sockets between provider and relay hold
	// (up to 4 MiB on loopback while nothing is read), on one
	// connection: the provider's writer holds the rest.
	const calls = 160
	l := &lender{barrier: make(chan struct{}), want: calls, doneCh: make(chan struct{}), total: calls}
	srv := newProtocol(t, nil)
	u := exportLender(t, srv, l, protocol.KeyTimeout, testTimeoutMillis) // the replies wait; -race is slow
	relay := startHoldReplies(t, u)
	cli := newProtocol(t, &dubboOptions{Connections: 1})
	inv := refer(t, cli, relay.url(u))

	const n = 60 << 10 // pooled buffers hold up to 64 KiB
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			var reply []byte
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Echo", Args: []any{lentPayload(uint64(i), n)}, Reply: &reply})
			if err == nil && !bytes.Equal(reply, lentPayload(uint64(i), n)) {
				err = fmt.Errorf("reply is not the argument: %v", checkLentPayload(reply, n))
			}
			if err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
			}
		})
	}
	select {
	case <-l.doneCh:
	case <-ctx.Done():
		t.Fatal("the methods did not all return")
	}
	// Every method has returned, and the requests were all read while
	// they ran. More requests now, on another connection, straight to
	// the provider: they are read into pooled buffers. Then the replies
	// held back go through.
	direct := refer(t, cli, u)
	for i := range calls {
		var sum int64
		_, err := direct.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{lentPayload(uint64(1000+i), n)}, Reply: &sum})
		require.NoError(t, err)
	}
	relay.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBorrowedJSON: with json, which cannot lend its input, a Borrowed
// argument is a copy, and the calls work as with msgpack.
func TestBorrowedJSON(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	u := exportLender(t, srv, &lender{}, protocol.KeySerialization, "json")
	inv := refer(t, newProtocol(t, nil), u)
	for _, n := range []int{8, 16 << 10} {
		var reply []byte
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Echo", Args: []any{lentPayload(7, n)}, Reply: &reply})
		require.NoError(t, err)
		assert.Equal(t, lentPayload(7, n), reply)
		var sum int64
		_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{[]byte{1, 2, 3}}, Reply: &sum})
		require.NoError(t, err)
		assert.Equal(t, int64(6), sum)
	}
}

// TestBorrowedFromBorrowedStub: a consumer that declares the parameter as
// service.Borrowed too sends it as a []byte.
func TestBorrowedFromBorrowedStub(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	u := exportLender(t, srv, &lender{})
	inv := refer(t, newProtocol(t, nil), u)
	var sum int64
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{service.Borrowed{1, 2, 3, 4}}, Reply: &sum})
	require.NoError(t, err)
	assert.Equal(t, int64(10), sum)
	var reply []byte
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Echo", Args: []any{service.Borrowed(lentPayload(3, 20000))}, Reply: &reply})
	require.NoError(t, err)
	assert.Equal(t, lentPayload(3, 20000), reply)
	// A nil argument is a nil Borrowed.
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{nil}, Reply: &sum})
	require.NoError(t, err)
	assert.Equal(t, int64(0), sum)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{"not bytes"}, Reply: &sum})
	require.NoError(t, err, "msgpack reads a str as bytes")
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Sum", Args: []any{42}, Reply: &sum})
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}
