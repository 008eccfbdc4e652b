package dubbo

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// blocker's Block waits for release; Hello answers at once. Both count.
type blocker struct {
	u       *protocol.URL
	calls   atomic.Int64
	started chan struct{}
	release chan struct{}
}

func (b *blocker) URL() *protocol.URL                     { return b.u }
func (b *blocker) ArgTypes(string) ([]reflect.Type, bool) { return nil, true }
func (b *blocker) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	b.calls.Add(1)
	if inv.Method == "Block" {
		b.started <- struct{}{}
		<-b.release
	}
	return &protocol.Result{Value: inv.Method}, nil
}

// TestExpiredRequestNotRun: a request whose timeout runs out while it
// waits in the provider's queue is not run once a worker takes it (its
// consumer gave up, and may have retried it elsewhere: running it would
// execute it twice); it is answered a timeout and counted in
// Stats.Expired. The test is inside the package to see the port's queue
// (exchange.Server.Held): the request must have been read before its time
// is counted.
func TestExpiredRequestNotRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := New(&Options{Workers: 1, Queue: 4})
	require.NoError(t, err)
	defer srv.Close()
	b := &blocker{u: protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Blocker", nil),
		started: make(chan struct{}, 1), release: make(chan struct{})}
	exp, err := srv.Export(b)
	require.NoError(t, err)
	es := exp.(*Exporter).s.es
	u := exp.(*Exporter).URL()
	cli, err := New(nil)
	require.NoError(t, err)
	defer cli.Close()
	inv, err := cli.Refer(u)
	require.NoError(t, err)

	blocked := make(chan error, 1)
	go func() {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "Block"})
		blocked <- err
	}()
	<-b.started // the only worker is taken
	const timeout = 50 * time.Millisecond
	short, err := cli.Refer(u.With(protocol.KeyTimeout, "50"))
	require.NoError(t, err)
	late := make(chan error, 1)
	go func() {
		_, err := short.Invoke(ctx, &protocol.Invocation{Method: "Hello"})
		late <- err
	}()
	require.Eventually(t, func() bool { return es.Held() == 2 }, 10*time.Second, time.Millisecond)
	read := time.Now() // the late request was read by now
	require.ErrorIs(t, <-late, status.ErrTimeout)
	require.Eventually(t, func() bool { return time.Since(read) > timeout }, 10*time.Second, time.Millisecond)
	close(b.release)
	require.NoError(t, <-blocked)
	require.Eventually(t, func() bool { return srv.Stats().Expired == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(1), b.calls.Load(), "only Block ran")
	require.Eventually(t, func() bool { return es.Held() == 0 }, 10*time.Second, time.Millisecond)

	// A request in time still runs.
	res, err := short.Invoke(ctx, &protocol.Invocation{Method: "Hello"})
	require.NoError(t, err)
	require.Equal(t, "Hello", res.Value)
	require.Equal(t, uint64(1), srv.Stats().Expired)
	require.Equal(t, int64(2), b.calls.Load())
}
