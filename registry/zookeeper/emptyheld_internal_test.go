package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// listsListener hands every list it is notified of to a channel.
type listsListener chan []*protocol.URL

func (l listsListener) Notify(urls []*protocol.URL) { l <- urls }

// After a partition that expired a provider's session, the consumer whose
// session came back first lists an empty providers node while the
// provider's re-registration is still in flight (go-zookeeper pauses a
// second before it even asks for a new session). That empty list is held
// back (peerRecovery), not delivered once EmptyGrace has passed since the
// consumer's own session came back. The provider stays cut off until the
// consumer has decided, so the old code, which delivered the empty list,
// fails here whatever the machine's load.
func TestEmptyHeldWhileProvidersRecover(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	zkc := zktest.Start(t)
	pp := zktest.NewProxy(t, zkc.Servers[0].Addr)
	cp := zktest.NewProxy(t, zkc.Servers[0].Addr)
	held := make(chan time.Duration, 64)
	testHookEmptyHeld = func(d time.Duration) {
		select {
		case held <- d:
		default:
		}
	}
	t.Cleanup(func() { testHookEmptyHeld = nil })
	o := Options{
		Application:     "test",
		SessionTimeout:  3 * time.Second,
		RetryMin:        50 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		WatchdogTimeout: time.Minute,
		EmptyGrace:      50 * time.Millisecond, // the consumer's own grace alone ends at once
		RegisterWait:    time.Second,
		NoCacheFile:     true,
	}
	open := func(addr string) *Registry {
		r, err := New("zookeeper://"+addr, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	prov, cons := open(pp.Addr), open(cp.Addr)
	const iface = "test.EmptyHeld"
	u := protocol.NewURL("dubbo", "127.0.0.1", 20501, iface, map[string]string{protocol.KeyInterface: iface})
	if err := prov.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	lists := make(listsListener, 64)
	c := protocol.NewURL("consumer", "127.0.0.1", 0, iface, map[string]string{protocol.KeyInterface: iface, protocol.KeySide: "consumer"})
	if err := cons.Subscribe(c, lists); err != nil {
		t.Fatal(err)
	}
	cur := 0 // providers in the last list the consumer was handed
	next := func() {
		t.Helper()
		select {
		case l := <-lists:
			cur = len(l)
		case <-ctx.Done():
			t.Fatal("no provider list")
		}
	}
	for cur != 1 {
		next()
	}

	raw := zktest.Client(t, zkc.Addrs()...)
	pp.Block()
	cp.Block()
	// The server expires the provider's session and deletes its node.
	watchCount(ctx, t, raw, prov.CategoryPath(iface, registry.CategoryProviders), 0)
	cp.Unblock() // the consumer comes back first and lists an empty node
	select {
	case d := <-held:
		t.Logf("empty list held back for %v more", d.Round(time.Millisecond))
	case l := <-lists:
		t.Fatalf("list of %d providers delivered while the provider could not have re-registered yet, want the empty one held back", len(l))
	case <-ctx.Done():
		t.Fatal("the consumer never listed the providers again")
	}
	pp.Unblock()
	// The provider re-registers; whatever the consumer was handed in
	// between (a slow machine may outlast the hold), it ends with it.
	watchCount(ctx, t, raw, prov.CategoryPath(iface, registry.CategoryProviders), 1)
	for {
		select {
		case l := <-lists:
			cur = len(l)
			continue
		default:
		}
		if cur == 1 {
			return
		}
		next()
	}
}

// watchCount waits, with a child watch, until node p has n children.
func watchCount(ctx context.Context, t *testing.T, c *zk.Conn, p string, n int) {
	t.Helper()
	for {
		kids, _, ch, err := c.ChildrenW(p)
		if err != nil {
			t.Fatalf("list %s: %v", p, err)
		}
		if len(kids) == n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s has %d children, want %d", p, len(kids), n)
		}
	}
}
