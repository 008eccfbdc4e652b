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

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
)

// The reconnect sentinel is a watch go-zookeeper must always hold for the
// session's reconnects to settle at the SetWatches packet (see
// armSentinel). It is armed again when it fires: when someone creates the
// node (the watch fires, and the new one is a data watch), deletes it
// again, and when the session expires (go-zookeeper ends every watch; the
// new session arms it anew). After each, a reconnect settles when the
// SetWatches packet is written, without settleFallback (an hour here).
func TestSentinelRearmed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	noFallback(t)
	// Each reconnect below must get the same session back: go-zookeeper
	// redials its only server a second after the cut (connect's
	// retryStart pause), and its last ping may be a third of the session
	// before the cut, so a 2 s session kept about 0.3 s against expiring
	// (disconnected 1.00-1.07 s at load 13). 5 s keeps over 2 s; the
	// expiry step waits that much longer.
	r, px, direct := proxiedRegistryWith(t, 5*time.Second)
	zc := zktest.Client(t, direct)
	_, sid := readyWithSentinel(ctx, t, r)

	var setWatches atomic.Int32
	sh := func(*handshakeConn) { setWatches.Add(1) }
	testHookSetWatches.Store(&sh)
	t.Cleanup(func() { testHookSetWatches.Store(nil) })
	// reconnect cuts the connection and waits until the session that comes
	// back has settled with a SetWatches packet written for it.
	reconnect := func(what string) {
		t.Helper()
		r.mu.Lock()
		gen0 := r.settleGen
		r.mu.Unlock()
		before := setWatches.Load()
		px.Block()
		waitUntil(ctx, t, what+": disconnected", func() bool { return !r.Stats().HasSession })
		px.Unblock()
		waitUntil(ctx, t, what+": settled again", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.settled && r.hasSession && r.settleGen > gen0
		})
		if setWatches.Load() == before {
			t.Fatalf("%s: the session came back with no SetWatches packet written", what)
		}
		fallbackUnused(t, r)
	}
	sentinel := func() <-chan zk.Event {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.sentinelCh
	}
	rearmed := func(what string, old <-chan zk.Event) {
		t.Helper()
		waitUntil(ctx, t, what+": sentinel armed again", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			ch := r.sentinelCh
			return ch != nil && ch != old && len(ch) == 0 && r.watches[ch] == r.conn
		})
	}
	reconnect("first reconnect")

	old := sentinel()
	_, err := zc.Create(r.sentinelPath, nil, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) { // no root node yet
		if _, err := zc.Create("/"+r.opts.Root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
		_, err = zc.Create(r.sentinelPath, nil, 0, zk.WorldACL(zk.PermAll))
	}
	if err != nil {
		t.Fatal(err)
	}
	rearmed("node created", old)
	reconnect("reconnect with the node there")
	old = sentinel()
	if err := zc.Delete(r.sentinelPath, -1); err != nil {
		t.Fatal(err)
	}
	rearmed("node deleted", old)
	reconnect("reconnect after the node went")

	// Expiry: a registered node shows when the server ended the session.
	const iface = "test.Sentinel"
	u := protocol.NewURL("dubbo", "127.0.0.1", 20621, iface, map[string]string{protocol.KeyInterface: iface})
	if err := r.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	node := r.NodePath(u)
	px.Block()
	waitUntil(ctx, t, "session expired on the server", func() bool {
		ok, _, err := zc.Exists(node)
		return err == nil && !ok
	})
	px.Unblock()
	_, sid2 := readyWithSentinel(ctx, t, r)
	if sid2 == sid {
		t.Fatalf("session %x kept; want a new one (the server expired it)", sid)
	}
	reconnect("reconnect of the new session")
}

// A new session (after an expiry) holds no watch: go-zookeeper dropped
// them all, the sentinel's too. A watch call queued while no connection
// was up is written first on the new session's connection, and its answer
// may add a watch before go-zookeeper decides, unseen, whether to re-send
// any. The session used to wait settleFallback then (a guess; an hour
// here, so the test would time out); now it settles at once and the
// answers handed over before the fallback's time carry no zxid, so that
// go-zookeeper's receive loop writes none while it may be read.
func TestQueuedWatchCallOnNewSessionSettlesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	noFallback(t)
	r, px, direct := proxiedRegistryWith(t, 2*time.Second)
	zc := zktest.Client(t, direct)
	conn, sid := readyWithSentinel(ctx, t, r)
	const iface = "test.NewSession"
	u := protocol.NewURL("dubbo", "127.0.0.1", 20622, iface, map[string]string{protocol.KeyInterface: iface})
	if err := r.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	node := r.NodePath(u)
	px.Block()
	waitUntil(ctx, t, "session expired on the server", func() bool {
		ok, _, err := zc.Exists(node)
		return err == nil && !ok
	})

	type result struct {
		ch  <-chan zk.Event
		err error
	}
	res := make(chan result, 1)
	var once sync.Once
	dial := func() {
		if conn.SessionID() != 0 {
			return // not yet told the session expired
		}
		once.Do(func() {
			// go-zookeeper fails the requests queued before each round of
			// dials; one queued now is written first on the new session.
			go func() {
				_, ch, err := r.childrenW(conn, "/zookeeper")
				res <- result{ch, err}
			}()
			buf := make([]byte, 1<<20)
			waitUntil(ctx, t, "watch call queued", func() bool { return queuedBy(buf, "(*Registry).childrenW") })
		})
	}
	testHookDial.Store(&dial)
	t.Cleanup(func() { testHookDial.Store(nil) })
	px.Unblock()
	var got result
	select {
	case got = <-res:
	case <-ctx.Done():
		t.Fatal("the queued watch call did not return (the new session waits for the fallback)")
	}
	if got.err != nil || got.ch == nil {
		t.Fatalf("watch call: channel %v, %v; want a channel", got.ch != nil, got.err)
	}
	_, sid2 := readyWithSentinel(ctx, t, r)
	if sid2 == sid {
		t.Fatalf("session %x kept; want a new one (the server expired it)", sid)
	}
	fallbackUnused(t, r)
	if n := r.settleZeroed.Load(); n == 0 {
		t.Fatal("no session settled with zxids cleared")
	}
	r.mu.Lock()
	socks := r.socks
	r.mu.Unlock()
	socks.mu.Lock()
	var zeroed uint64
	for hc := range socks.open {
		zeroed += hc.zeroed.Load()
	}
	socks.mu.Unlock()
	if zeroed == 0 {
		t.Fatal("no answer handed over with its zxid cleared on the new session's connection")
	}
}

// queuedBy reports whether a goroutine whose stack holds fn waits in
// go-zookeeper for the answer to a request it queued (buf holds the
// goroutines' stacks).
func queuedBy(buf []byte, fn string) bool {
	n := runtime.Stack(buf, true)
	for g := range bytes.SplitSeq(buf[:n], []byte("\n\n")) {
		if bytes.Contains(g, []byte("zk.(*Conn).request(")) && bytes.Contains(g, []byte(fn)) {
			return true
		}
	}
	return false
}
