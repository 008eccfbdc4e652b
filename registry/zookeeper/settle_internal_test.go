package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
)

// After a reconnect that kept the session, go-zookeeper re-sends the
// watches it holds, reading its last zxid unguarded while its receive
// loop writes it for every answered request (go-zookeeper/zk#35). The
// registry's own requests wait until that SetWatches packet is written,
// whenever go-zookeeper's goroutine gets there. Here that goroutine is
// held where it tells the session is up, before it starts the
// connection's send loop and re-sends the watches, as a loaded machine can
// hold it, until the registry either holds its requests back or has a
// listing under way: a listing queued then would be the first request
// written. The first request on the new connection must be the SetWatches
// one. With a fixed wait instead (the registry waited 100 ms until session
// 22) a listing goes first, and under -race the detector reports the
// library's race.
func TestRequestsWaitForWatchesResent(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	noFallback(t)
	r, px := proxiedRegistry(t)
	const iface = "test.Settle"
	prov := func(port int) *protocol.URL {
		return protocol.NewURL("dubbo", "127.0.0.1", port, iface, map[string]string{protocol.KeyInterface: iface})
	}
	if err := r.Register(ctx, prov(20601)); err != nil {
		t.Fatal(err)
	}
	lists := make(listsListener, 64)
	c := protocol.NewURL("consumer", "127.0.0.1", 0, iface, map[string]string{protocol.KeyInterface: iface, protocol.KeySide: "consumer"})
	if err := r.Subscribe(c, lists); err != nil {
		t.Fatal(err)
	}
	waitLen(ctx, t, lists, 1)
	r.mu.Lock()
	held := len(r.watches)
	r.mu.Unlock()
	if held == 0 {
		t.Fatal("no watch held after the first listing")
	}

	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	hooked := make(chan string, 1)
	hook := func(got *Registry) {
		if got != r {
			return
		}
		buf := make([]byte, 1<<20)
		for {
			r.mu.Lock()
			holding := r.hasSession && !r.settled
			r.mu.Unlock()
			switch {
			case holding:
				hooked <- "held back"
				return
			case queued(buf):
				hooked <- "a request queued"
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
	px.Block()
	waitUntil(ctx, t, "disconnected", func() bool { return !r.Stats().HasSession })
	sid := r.Stats().SessionID
	testHookSession.Store(&hook)
	t.Cleanup(func() { testHookSession.Store(nil) })
	px.Unblock()
	select {
	case what := <-hooked:
		t.Logf("after the session came back: %s", what)
	case <-ctx.Done():
		t.Fatal("the session did not come back")
	}
	waitUntil(ctx, t, "settled", func() bool { _, _, _, ok := r.ready(); return ok })
	if got := r.Stats().SessionID; got != sid {
		t.Fatalf("session %x -> %x, want it kept (the test is about a reconnect)", sid, got)
	}
	r.mu.Lock()
	socks := r.socks
	r.mu.Unlock()
	socks.mu.Lock()
	var ops []int32
	for hc := range socks.open {
		ops = append(ops, hc.firstOp.Load())
	}
	socks.mu.Unlock()
	if len(ops) != 1 || ops[0] != opSetWatches {
		t.Fatalf("first requests on the open connections: %v, want one connection whose first is SetWatches (%d)", ops, opSetWatches)
	}
	// The watch was re-armed: a change reaches the subscription.
	if err := r.Register(ctx, prov(20602)); err != nil {
		t.Fatal(err)
	}
	waitLen(ctx, t, lists, 2)
	fallbackUnused(t, r)
}

// noFallback makes settleFallback an hour for the test: a session that
// would settle only by it makes the test time out.
func noFallback(t *testing.T) {
	testSettleFallback.Store(int64(time.Hour))
	t.Cleanup(func() { testSettleFallback.Store(0) })
}

// fallbackUnused fails t if a session of r settled by settleFallback.
func fallbackUnused(t *testing.T, r *Registry) {
	t.Helper()
	if f := r.settleFallbacks.Load(); f != 0 {
		t.Fatalf("%d sessions settled by settleFallback (wrong counts); want none", f)
	}
}

// queued reports whether a goroutine waits in go-zookeeper for the answer
// to a request it queued (buf holds the goroutines' stacks).
func queued(buf []byte) bool {
	n := runtime.Stack(buf, true)
	return bytes.Contains(buf[:n], []byte("zk.(*Conn).request("))
}

// waitLen waits until lists delivers a list of n providers.
func waitLen(ctx context.Context, t *testing.T, lists listsListener, n int) {
	t.Helper()
	for {
		select {
		case l := <-lists:
			if len(l) == n {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no list of %d providers", n)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// Watch channels a subscription dropped unfired (it listed the node again)
// are forgotten once they fire, as the registry keeps listing: the set
// stays about the size of the watches go-zookeeper still holds.
func TestFiredWatchesForgotten(t *testing.T) {
	r := &Registry{watches: map[<-chan zk.Event]*zk.Conn{}}
	var held []chan zk.Event
	for i := range 1000 {
		ch := make(chan zk.Event, 1)
		r.watchCall(nil, opGetChildren2, "/p")(ch)
		if i%10 == 0 {
			held = append(held, ch) // never fires
		} else {
			ch <- zk.Event{Type: zk.EventNodeChildrenChanged} // fired, dropped
			close(ch)
		}
	}
	if n := len(r.watches); n > len(held)+64 {
		t.Fatalf("%d watch channels kept, %d of them unfired", n, len(held))
	}
	for _, ch := range held {
		if _, ok := r.watches[ch]; !ok {
			t.Fatal("an unfired watch channel was forgotten")
		}
	}
}

// proxiedRegistry starts a ZooKeeper server and a registry that reaches
// it through a zktest.Proxy (so a test can cut and hold the connection),
// with quick retries, a watchdog that does not re-dial for a minute (the
// proxy's refusals must not replace the session) and no cache file. The
// registry is closed when the test ends.
func proxiedRegistry(t *testing.T) (*Registry, *zktest.Proxy) {
	t.Helper()
	r, px, _ := proxiedRegistryWith(t, DefaultSessionTimeout)
	return r, px
}

// proxiedRegistryWith is proxiedRegistry with the given session timeout;
// it also returns the server's address (not through the proxy).
func proxiedRegistryWith(t *testing.T, session time.Duration) (*Registry, *zktest.Proxy, string) {
	t.Helper()
	zkc := zktest.Start(t)
	px := zktest.NewProxy(t, zkc.Servers[0].Addr)
	r, err := New("zookeeper://"+px.Addr, Options{
		Application:     "test",
		SessionTimeout:  session,
		RetryMin:        50 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		WatchdogTimeout: time.Minute,
		RegisterWait:    30 * time.Second,
		NoCacheFile:     true,
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, px, zkc.Servers[0].Addr
}

// A watch that fires while the session waits to settle may have been the
// last one go-zookeeper held: go-zookeeper then re-sends none, so no
// SetWatches packet comes. The subscription receiving the fire re-runs
// the settle check, and the session settles at once, not after
// settleFallback.
func TestFireWhileSettlingSettles(t *testing.T) {
	r := &Registry{log: zap.NewNop(), watches: map[<-chan zk.Event]*zk.Conn{}, hasSession: true}
	ch := make(chan zk.Event, 1)
	r.watchCall(nil, opGetChildren2, "/p")(ch)
	r.mu.Lock()
	settled := r.settled
	r.mu.Unlock()
	if settled {
		t.Fatal("settled although a watch is held and no SetWatches packet was written")
	}
	ch <- zk.Event{Type: zk.EventNodeChildrenChanged, Path: "/dubbo/x/providers"}
	close(ch)
	<-ch // the subscription receives it
	r.watchFired(ch)
	r.mu.Lock()
	settled = r.settled
	r.mu.Unlock()
	if !settled {
		t.Fatal("not settled after the last watch held fired")
	}
	if f := r.settleFallbacks.Load(); f != 0 {
		t.Fatalf("fallback used: %d; want none", f)
	}
}

// A watch call queued while the connection was down (case (b1) of gate's
// 03:28 note, session 25) is written first on the new connection, and its
// answer would add a watch. The registry holds that answer until the
// session settled; without a watch held go-zookeeper re-sent none, wrote
// no SetWatches packet and gave no sign of having decided that, so the
// session settled only by settleFallback (a guess). The reconnect sentinel
// (armSentinel) is a watch go-zookeeper always holds, so the SetWatches
// packet always comes: the session settles when it is written, and the
// queued call's answer is handed over after it. The fallback is an hour
// here: without the sentinel the test times out.
func TestQueuedWatchCallSettlesAtSetWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	noFallback(t)
	r, px := proxiedRegistry(t)
	conn, sid := readyWithSentinel(ctx, t, r)
	r.mu.Lock()
	gen0 := r.settleGen
	r.mu.Unlock()

	var setWatches atomic.Int32
	settledAtSetWatches := make(chan bool, 4)
	sh := func(*handshakeConn) {
		setWatches.Add(1)
		r.mu.Lock()
		settledAtSetWatches <- r.settled && r.settleGen > gen0
		r.mu.Unlock()
	}
	testHookSetWatches.Store(&sh)
	t.Cleanup(func() { testHookSetWatches.Store(nil) })
	px.Block()
	waitUntil(ctx, t, "disconnected", func() bool { return !r.Stats().HasSession })
	var setWatchesAtReturn atomic.Int32
	setWatchesAtReturn.Store(-1)
	var ret sync.Once
	rh := func() { ret.Do(func() { setWatchesAtReturn.Store(setWatches.Load()) }) }
	testHookWatchReturned.Store(&rh)
	t.Cleanup(func() { testHookWatchReturned.Store(nil) })
	type result struct {
		ch  <-chan zk.Event
		err error
	}
	res := make(chan result, 1)
	go func() {
		_, ch, err := r.childrenW(conn, "/zookeeper")
		res <- result{ch, err}
	}()
	buf := make([]byte, 1<<20)
	waitUntil(ctx, t, "request queued", func() bool { return queued(buf) })
	px.Unblock()
	var got result
	select {
	case got = <-res:
	case <-ctx.Done():
		t.Fatal("the queued watch call did not return (no SetWatches packet: the session waits for the fallback)")
	}
	if got.err != nil || got.ch == nil {
		t.Fatalf("watch call: channel %v, %v; want a channel", got.ch != nil, got.err)
	}
	select {
	case settled := <-settledAtSetWatches:
		if settled {
			t.Fatal("the session settled before the SetWatches packet was written, with a watch held")
		}
	case <-ctx.Done():
		t.Fatal("no SetWatches packet written")
	}
	if n := setWatchesAtReturn.Load(); n != 1 {
		t.Fatalf("%d SetWatches packets written when the queued call returned; want 1 (its answer waits for the packet)", n)
	}
	waitUntil(ctx, t, "settled", func() bool { _, _, _, ok := r.ready(); return ok })
	fallbackUnused(t, r)
	if got := r.Stats().SessionID; got != sid {
		t.Fatalf("session %x -> %x, want it kept (the test is about a reconnect)", sid, got)
	}
}

// readyWithSentinel waits until r has a session, settled, and holds its
// reconnect sentinel's watch on it (armed by the registration loop once
// the session is ready), and returns the connection and session id.
func readyWithSentinel(ctx context.Context, t *testing.T, r *Registry) (*zk.Conn, int64) {
	t.Helper()
	var conn *zk.Conn
	var sid int64
	waitUntil(ctx, t, "session and sentinel watch", func() bool {
		c, id, _, ok := r.ready()
		if !ok {
			return false
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		ch := r.sentinelCh
		if ch == nil || r.sentinelConn != c || len(ch) > 0 || r.watches[ch] != c {
			return false
		}
		conn, sid = c, id
		return true
	})
	return conn, sid
}

// A watch call whose request was written on a connection that closed
// before its answer was read adds no watch: go-zookeeper fails it. The
// session that comes back settles without waiting for that call's caller
// (held here until the session settled): when the SetWatches packet for
// the reconnect sentinel is written, or at once were nothing else held.
// The registry waited for the call to return before, so with the caller
// held it waited for settleFallback (an hour here: the test would time
// out).
func TestFailedWatchCallSettlesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	noFallback(t)
	r, px := proxiedRegistry(t)
	conn, sid := readyWithSentinel(ctx, t, r)
	r.mu.Lock()
	gen0 := r.settleGen
	r.mu.Unlock()

	var cut sync.Once
	wh := func(*handshakeConn) { cut.Do(px.Block) } // written, never answered
	testHookWatchRequest.Store(&wh)
	t.Cleanup(func() { testHookWatchRequest.Store(nil) })
	settledFirst := make(chan bool, 1)
	var ret sync.Once
	rh := func() {
		ret.Do(func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				r.mu.Lock()
				ok := r.settleGen > gen0 && r.hasSession && r.settled
				up := r.upAt
				r.mu.Unlock()
				if ok {
					t.Logf("settled %v after the session came back, the failed call's caller still held", time.Since(up).Round(time.Millisecond))
					settledFirst <- true
					return
				}
				select {
				case <-ctx.Done():
					settledFirst <- false
					return
				case <-tick.C:
				}
			}
		})
	}
	testHookWatchReturned.Store(&rh)
	t.Cleanup(func() { testHookWatchReturned.Store(nil) })
	res := make(chan error, 1)
	go func() {
		_, _, err := r.childrenW(conn, "/zookeeper")
		res <- err
	}()
	waitUntil(ctx, t, "disconnected", func() bool { return !r.Stats().HasSession })
	px.Unblock()
	select {
	case ok := <-settledFirst:
		if !ok {
			t.Fatal("the session did not settle while the failed watch call's caller was held")
		}
	case <-ctx.Done():
		t.Fatal("no session settled while the failed watch call's caller was held")
	}
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("the watch call whose connection closed succeeded")
		}
		t.Logf("watch call: %v", err)
	case <-ctx.Done():
		t.Fatal("the watch call did not return")
	}
	fallbackUnused(t, r)
	if got := r.Stats().SessionID; got != sid {
		t.Fatalf("session %x -> %x, want it kept (the test is about a reconnect)", sid, got)
	}
	if _, _, _, ok := r.ready(); !ok {
		t.Fatal("not ready after the session settled")
	}
}

// A watch call whose answer was read before the connection closed left a
// watch in go-zookeeper, though its caller may not have its channel yet
// (held here until the session settled): go-zookeeper re-sends that watch,
// so the session that comes back settles only when the SetWatches packet
// is written, not before (it would let answers race the packet's zxid).
func TestAnsweredWatchCallWaitsForSetWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	noFallback(t)
	r, px := proxiedRegistry(t)
	conn, sid := readyWithSentinel(ctx, t, r)
	r.mu.Lock()
	gen0 := r.settleGen
	r.mu.Unlock()

	answered, release := make(chan struct{}), make(chan struct{})
	var ret sync.Once
	rh := func() {
		ret.Do(func() {
			close(answered)
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
	}
	testHookWatchReturned.Store(&rh)
	t.Cleanup(func() { testHookWatchReturned.Store(nil) })
	res := make(chan error, 1)
	go func() {
		_, ch, err := r.childrenW(conn, "/zookeeper")
		if err == nil && ch == nil {
			err = errors.New("no watch channel")
		}
		res <- err
	}()
	select {
	case <-answered:
	case <-ctx.Done():
		t.Fatal("the watch call was not answered")
	}
	settledAtSetWatches := make(chan bool, 4)
	sh := func(*handshakeConn) {
		r.mu.Lock()
		settledAtSetWatches <- r.settled && r.settleGen > gen0
		r.mu.Unlock()
	}
	testHookSetWatches.Store(&sh)
	t.Cleanup(func() { testHookSetWatches.Store(nil) })
	px.Block()
	waitUntil(ctx, t, "disconnected", func() bool { return !r.Stats().HasSession })
	px.Unblock()
	select {
	case settled := <-settledAtSetWatches:
		if settled {
			t.Fatal("the session settled before the SetWatches packet was written, with a watch held")
		}
	case <-ctx.Done():
		t.Fatal("no SetWatches packet written")
	}
	waitUntil(ctx, t, "settled", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.settled && r.settleGen > gen0
	})
	close(release)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("watch call: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the watch call did not return")
	}
	fallbackUnused(t, r)
	if got := r.Stats().SessionID; got != sid {
		t.Fatalf("session %x -> %x, want it kept (the test is about a reconnect)", sid, got)
	}
}
