package zookeeper_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/zktest"
)

// TestCloseBoundedWhenZooKeeperFreezes freezes ZooKeeper (SIGSTOP: it keeps
// its sockets and answers nothing) while the registration loop has
// requests waiting for it, and checks that Close returns within a few
// seconds rather than after the requests' receive timeouts (two thirds of
// the 10 s session, and more for each request after the first), and that
// no goroutine of the registry or of its ZooKeeper connection is left.
func TestCloseBoundedWhenZooKeeperFreezes(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	ignore := goleak.IgnoreCurrent()
	svc := iface(t)
	o := opts(t, t.TempDir())
	o.SessionTimeout = 10 * time.Second // the most tickTime 500 ms allows
	o.WatchdogTimeout = time.Minute
	r := newRegistry(t, zkc.Address(), o)
	if err := r.Register(ctx, provider(svc, 20301)); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := r.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20301)) // listed back from ZooKeeper

	zkc.Servers[0].Pause()
	t.Cleanup(zkc.Servers[0].Resume)
	// Three registrations for the loop to send to the frozen server; a
	// cancelled context returns at once.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for port := 20302; port <= 20304; port++ {
		if err := r.Register(gone, provider(svc, port)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "the registration loop waiting for ZooKeeper", loopInRequest)

	start := time.Now()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = r.Close()
	}()
	// Close waits RegisterWait (1 s), then drops the connection. Without
	// the bound it waited for the loop's requests: 52 s in a run.
	const bound = 5 * time.Second
	select {
	case <-closed:
		t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(bound):
		t.Errorf("Close has not returned after %v with ZooKeeper frozen", bound)
		<-closed
		t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
	}
	goleak.VerifyNone(t, ignore)
}

// loopInRequest reports whether a goroutine is in the registration loop's
// reconcile, inside a go-zookeeper request.
func loopInRequest() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("(*Registry).reconcile")) && bytes.Contains(g, []byte("zk.(*Conn).request")) {
			return true
		}
	}
	return false
}
