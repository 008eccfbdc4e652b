package zookeeper_test

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// TestHealthy runs the scenarios that leave the server alone against one
// standalone ZooKeeper.
func TestHealthy(t *testing.T) {
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)

	t.Run("RegisterUnregisterClose", func(t *testing.T) {
		ctx := testCtx(t)
		dir := t.TempDir()
		svc := iface(t)
		r1 := newRegistry(t, zkc.Address(), syncOpts(t, dir))
		r2 := newRegistry(t, zkc.Address(), syncOpts(t, dir))
		a, b, c := provider(svc, 20001), provider(svc, 20002), provider(svc, 20003)
		if err := r1.Register(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := r1.Register(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := r2.Register(ctx, c); err != nil {
			t.Fatal(err)
		}
		cons := consumer(svc)
		if err := r2.Register(ctx, cons); err != nil {
			t.Fatal(err)
		}
		pp := r1.CategoryPath(svc, registry.CategoryProviders)
		kids := waitChildren(ctx, t, raw, pp, 3)
		want := map[string]bool{a.Escaped(): true, b.Escaped(): true, c.Escaped(): true}
		for _, k := range kids {
			if !want[k] {
				t.Errorf("unexpected child %s", k)
			}
		}
		waitChildren(ctx, t, raw, r1.CategoryPath(svc, registry.CategoryConsumers), 1)
		_, st, err := raw.Exists(r1.NodePath(a))
		if err != nil || st.EphemeralOwner == 0 || st.EphemeralOwner != r1.Stats().SessionID {
			t.Fatalf("node of a: owner %v (err %v), want ephemeral of session %d", st, err, r1.Stats().SessionID)
		}
		_, st, _ = raw.Exists(pp)
		if st.EphemeralOwner != 0 {
			t.Fatalf("category node is ephemeral")
		}
		if err := r1.Unregister(ctx, b); err != nil {
			t.Fatal(err)
		}
		// Unregister waits for the delete when a session is up.
		if kids, _, _ := raw.Children(pp); len(kids) != 2 {
			t.Fatalf("after Unregister(b): %d children, want 2", len(kids))
		}
		if err := r1.Close(); err != nil {
			t.Fatal(err)
		}
		if kids, _, _ := raw.Children(pp); len(kids) != 1 {
			t.Fatalf("after Close: %d children, want 1", len(kids))
		}
		if err := r1.Register(ctx, a); !errors.Is(err, zookeeper.ErrClosed) {
			t.Fatalf("Register after Close = %v, want ErrClosed", err)
		}
	})

	t.Run("SubscriberSeesArrivalAndDeparture", func(t *testing.T) {
		ctx := testCtx(t)
		dir := t.TempDir()
		svc := iface(t)
		prov := newRegistry(t, zkc.Address(), opts(t, dir))
		cons := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t) // empty at first
		if err := prov.Register(ctx, provider(svc, 20011)); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20011))
		if err := prov.Register(ctx, provider(svc, 20012)); err != nil {
			t.Fatal(err)
		}
		// A provider of another version is not listed.
		if err := prov.Register(ctx, provider(svc, 20013, "version", "2.0")); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20011), addr(20012))
		if err := prov.Unregister(ctx, provider(svc, 20011)); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20012))
		if err := prov.Unregister(ctx, provider(svc, 20012)); err != nil {
			t.Fatal(err)
		}
		// The last provider leaving a healthy session empties the list.
		rec.waitAddrs(ctx, t)
		// The version-2.0 subscriber sees only its provider.
		rec2 := newRecorder()
		if err := cons.Subscribe(consumer(svc, "version", "2.0"), rec2); err != nil {
			t.Fatal(err)
		}
		rec2.waitAddrs(ctx, t, addr(20013))
		if n := len(rec.snapshot()); n > 6 {
			t.Errorf("%d notifications for 5 changes", n)
		}
		// The cache holds what the consumer saw last. It is written after
		// the listeners are told (so a departure is not delayed by the
		// file's fsync): wait for it.
		waitFor(ctx, t, "the cache holds the version-2.0 provider", func() bool {
			urls, ok := cons.Cache().Load(consumer(svc, "version", "2.0").ServiceKey())
			return ok && len(urls) == 1 && urls[0].Port == 20013
		})
	})

	t.Run("MalformedChildrenIgnored", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		if err := prov.Register(ctx, provider(svc, 20021)); err != nil {
			t.Fatal(err)
		}
		pp := prov.CategoryPath(svc, registry.CategoryProviders)
		for _, junk := range []string{"garbage", "dubbo%3A%2F%2F%2Fno.host", "%zz%3A%2F%2F", "dubbo%3A%2F%2Fh%3Anotaport%2Fx"} {
			if _, err := raw.Create(pp+"/"+junk, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatalf("create %s: %v", junk, err)
			}
		}
		cons := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20021))
		if got := cons.Stats().Malformed; got != 4 {
			t.Fatalf("malformed = %d, want 4", got)
		}
		// A later valid provider is still delivered alongside the junk.
		if err := prov.Register(ctx, provider(svc, 20022)); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20021), addr(20022))
		// Re-listing does not report the same junk again.
		if got := cons.Stats().Malformed; got != 4 {
			t.Fatalf("malformed = %d after a re-list, want 4", got)
		}
	})

	t.Run("MaxChildren", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		for p := 20031; p < 20036; p++ {
			if err := prov.Register(ctx, provider(svc, p)); err != nil {
				t.Fatal(err)
			}
		}
		// The bound from the address, as YAML users give it.
		cons := newRegistry(t, zkc.Address()+"?max_children=3", opts(t, t.TempDir()))
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		// Five children over a bound of three: reported and skipped, not
		// cut to an arbitrary three.
		waitFor(ctx, t, "the node reported", func() bool { return cons.Stats().Oversized == 1 })
		if got, n := rec.last(); n != 0 {
			t.Fatalf("a list of an oversized node delivered: %v", got)
		}
		// Back within the bound, it is listed (after a backoff).
		for p := 20034; p < 20036; p++ {
			if err := prov.Unregister(ctx, provider(svc, p)); err != nil {
				t.Fatal(err)
			}
		}
		rec.waitAddrs(ctx, t, addr(20031), addr(20032), addr(20033))
		if got := cons.Stats().Oversized; got != 1 {
			t.Fatalf("oversized = %d, want 1 (reported once)", got)
		}
	})

	t.Run("DigestACL", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		o := opts(t, t.TempDir())
		o.Root = "secure"
		o.Username, o.Password = "provider", "s3cret"
		prov := newRegistry(t, zkc.Address(), o)
		if err := prov.Register(ctx, provider(svc, 20041)); err != nil {
			t.Fatal(err)
		}
		pp := prov.CategoryPath(svc, registry.CategoryProviders)
		// Unauthenticated clients may read the providers (as Dubbo's
		// tools do) but not write (see TestACL). Register may have gone
		// on in the background (no session within RegisterWait on a
		// loaded machine): wait for the node.
		waitChildren(ctx, t, raw, pp, 1)
		if err := raw.Delete(prov.NodePath(provider(svc, 20041)), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("unauthenticated Delete = %v, want ErrNoAuth", err)
		}
		// The same identity, given in the address, reads them.
		o2 := opts(t, t.TempDir())
		o2.Root = "secure"
		cons := newRegistry(t, "zookeeper://provider:s3cret@"+zkc.Servers[0].Addr, o2)
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(20041))
		// A wrong password cannot register: a permanent error.
		o3 := syncOpts(t, t.TempDir())
		o3.Root = "secure"
		o3.Username, o3.Password = "provider", "wrong"
		bad := newRegistry(t, zkc.Address(), o3)
		waitFor(ctx, t, "session", func() bool { return bad.Stats().HasSession })
		err := bad.Register(ctx, provider(svc, 20042))
		if !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("Register with a wrong password = %v, want ErrNoAuth", err)
		}
	})

	t.Run("Routers", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		r := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		rl := &routerRecorder{recorder: newRecorder(), routers: make(chan []*protocol.URL, 8)}
		if err := r.Subscribe(consumer(svc), rl); err != nil {
			t.Fatal(err)
		}
		next := func() []*protocol.URL {
			select {
			case l := <-rl.routers:
				return l
			case <-ctx.Done():
				t.Fatal("no routers notification")
				return nil
			}
		}
		if l := next(); len(l) != 0 {
			t.Fatalf("initial routers %v, want none", l)
		}
		rule := protocol.NewURL("condition", "0.0.0.0", 0, svc, map[string]string{"rule": "host = 1.2.3.4 => host = 5.6.7.8"})
		rp := r.CategoryPath(svc, registry.CategoryRouters)
		// A subscriber creates no node: the rule's writer creates the path.
		for _, p := range []string{path.Dir(rp), rp} {
			if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
		ruleNode, err := raw.Create(rp+"/"+rule.Escaped(), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		l := next()
		if len(l) != 1 || l[0].Param("rule", "") != "host = 1.2.3.4 => host = 5.6.7.8" {
			t.Fatalf("routers %v", l)
		}
		// Deleting the rule is an empty list (not "keep the last one", as
		// for providers): the consumer routes freely again.
		if err := raw.Delete(ruleNode, -1); err != nil {
			t.Fatal(err)
		}
		if l := next(); len(l) != 0 {
			t.Fatalf("routers after the rule was deleted %v, want none", l)
		}
	})

	t.Run("ManyProviders", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		const n = 200
		prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		cons := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		want := make([]string, 0, n)
		for i := range n {
			if err := prov.Register(ctx, provider(svc, 30000+i)); err != nil {
				t.Fatal(err)
			}
			want = append(want, addr(30000+i))
		}
		rec.waitAddrs(ctx, t, want...)
		waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), n)
		for i := range n {
			if err := prov.Unregister(ctx, provider(svc, 30000+i)); err != nil {
				t.Fatal(err)
			}
		}
		waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 0)
		rec.waitAddrs(ctx, t)
		// One-shot watches coalesce bursts: far fewer lists than changes.
		t.Logf("%d lists for %d changes", len(rec.snapshot()), 2*n)
		if got := len(rec.snapshot()); got > 2*n+1 {
			t.Fatalf("%d lists for %d changes", got, 2*n)
		}
	})

	t.Run("OperatorDeletedNodeRestored", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		o := opts(t, t.TempDir())
		o.Resync = 300 * time.Millisecond
		prov := newRegistry(t, zkc.Address(), o)
		u := provider(svc, 20051)
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
		if err := raw.Delete(prov.NodePath(u), -1); err != nil {
			t.Fatal(err)
		}
		waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 1)
	})
}

// TestOutageKeepsLists kills the only server for longer than the session
// timeout and restarts it with its data: lists are never emptied meanwhile
// and the same providers are listed afterwards.
func TestOutageKeepsLists(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	// A watchdog well above the restart time: a slow restart on a loaded
	// machine must not look like a server refusing our session. (8 s was
	// not enough at load 20 on 2 cores: the restarted server accepted
	// connections for 8.1 s before it granted sessions.)
	po, co := opts(t, t.TempDir()), opts(t, t.TempDir())
	po.WatchdogTimeout, co.WatchdogTimeout = 30*time.Second, 30*time.Second
	// The default session timeout (10 s, the most tickTime 500 allows),
	// not opts' 3 s: the restarted server counts every restored session's
	// timeout afresh from when it loads them, and at load 30+ neither it
	// nor the clients (a second's pause between rounds of dials) made the
	// reconnect within 3 s: both sessions expired, and the test, which
	// asserts that they survive, failed.
	po.SessionTimeout, co.SessionTimeout = zookeeper.DefaultSessionTimeout, zookeeper.DefaultSessionTimeout
	logs := observe(&co)
	prov := newRegistry(t, zkc.Address(), po)
	cons := newRegistry(t, zkc.Address(), co)
	for _, p := range []int{20101, 20102} {
		if err := prov.Register(ctx, provider(svc, p)); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20101), addr(20102))
	dir, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: consumer(svc), Protocol: fakeProtocol{}})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := cons.Subscribe(consumer(svc), dir); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "directory filled", func() bool { l := dir.Snapshot().Invokers(); return len(l) == 2 })
	before, provBefore := cons.Stats().SessionID, prov.Stats().SessionID

	zkc.Servers[0].Kill()
	waitFor(ctx, t, "disconnect", func() bool { return !cons.Stats().HasSession && !prov.Stats().HasSession })
	// Stay down for more than the session timeout, checking the directory
	// keeps both providers all along: the client cannot tell an expired
	// session from a live one until a server answers.
	down := time.NewTimer(co.SessionTimeout + 500*time.Millisecond)
	tick := time.NewTicker(20 * time.Millisecond)
	checks := 0
	for waiting := true; waiting; {
		select {
		case <-down.C:
			waiting = false
		case <-tick.C:
			if l := dir.Snapshot().Invokers(); len(l) != 2 {
				t.Fatalf("directory lists %d providers during the outage, want 2", len(l))
			}
			checks++
		}
	}
	tick.Stop()
	t.Logf("directory checked %d times during the outage", checks)
	// A subscriber added during the outage is served from the cache.
	rec2 := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec2); err != nil {
		t.Fatal(err)
	}
	rec2.waitAddrs(ctx, t, addr(20101), addr(20102))
	zkc.Servers[0].Start()

	waitFor(ctx, t, "session back", func() bool { return cons.Stats().HasSession && prov.Stats().HasSession })
	raw := zktest.Client(t, zkc.Addrs()...)
	waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 2)
	// A change after the outage still reaches the old subscription (watch re-armed).
	if err := prov.Register(ctx, provider(svc, 20103)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20101), addr(20102), addr(20103))
	rec2.waitAddrs(ctx, t, addr(20101), addr(20102), addr(20103))
	if n := rec.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered across the outage", n)
	}
	// The consumer said so, at info: disconnected, then reconnected with
	// its session.
	if n := logs.FilterMessage("zookeeper disconnected; keeping provider lists while reconnecting").Len(); n != 1 {
		t.Errorf("%d disconnect lines logged, want 1", n)
	}
	if l := logs.FilterMessage("zookeeper reconnected; session kept").All(); len(l) != 1 || l[0].ContextMap()["address"] != zkc.Servers[0].Addr {
		t.Errorf("reconnect lines logged: %+v, want 1 naming %s", l, zkc.Servers[0].Addr)
	}
	waitFor(ctx, t, "directory updated", func() bool { l := dir.Snapshot().Invokers(); return len(l) == 3 })
	// An outage is not an expiry: the sessions survive, and the watchdog
	// did not re-dial (refused connections do not count).
	if after := cons.Stats().SessionID; after != before {
		t.Errorf("consumer session changed across the outage: %x -> %x", before, after)
	}
	if st := prov.Stats(); st.SessionID != provBefore || st.Redials != 0 || cons.Stats().Redials != 0 {
		t.Errorf("provider session %x -> %x, redials %d/%d; want the same session and no redials",
			provBefore, st.SessionID, st.Redials, cons.Stats().Redials)
	}
}

// TestWipedDataRecovered restarts ZooKeeper with its data wiped: the
// watchdog re-dials (sending the credentials again on the new connection),
// providers re-register and subscribers see them again, without ever seeing
// an empty list.
func TestWipedDataRecovered(t *testing.T) {
	for _, digest := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "digest"}[digest], func(t *testing.T) {
			ctx := testCtx(t)
			zkc := zktest.Start(t)
			svc := iface(t)
			po, co := opts(t, t.TempDir()), opts(t, t.TempDir())
			// The providers re-register once their own watchdog re-dials;
			// under load that can take longer than the usual grace.
			co.EmptyGrace = 15 * time.Second
			if digest {
				po.Username, po.Password = "app", "pw"
				co.Username, co.Password = "app", "pw"
			}
			prov := newRegistry(t, zkc.Address(), po)
			cons := newRegistry(t, zkc.Address(), co)
			for _, p := range []int{20201, 20202} {
				if err := prov.Register(ctx, provider(svc, p)); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder()
			if err := cons.Subscribe(consumer(svc), rec); err != nil {
				t.Fatal(err)
			}
			rec.waitAddrs(ctx, t, addr(20201), addr(20202))

			s := zkc.Servers[0]
			s.Kill()
			s.WipeData()
			s.Start()
			raw := zktest.Client(t, zkc.Addrs()...)
			if digest {
				if err := raw.AddAuth("digest", []byte("app:pw")); err != nil {
					t.Fatal(err)
				}
			}
			pp := prov.CategoryPath(svc, registry.CategoryProviders)
			waitChildren(ctx, t, raw, pp, 2)
			if digest {
				for _, p := range []string{"/dubbo", path.Dir(pp), pp, prov.NodePath(provider(svc, 20201))} {
					if acl, _, err := raw.GetACL(p); err != nil || !sameACL(acl, wantACL()) {
						t.Fatalf("re-created %s: ACL %v (%v), want %v", p, acl, err, wantACL())
					}
				}
			}
			waitFor(ctx, t, "consumer session", func() bool { return cons.Stats().HasSession })
			if prov.Stats().Redials < 1 || cons.Stats().Redials < 1 {
				t.Fatalf("redials: provider %d consumer %d, want >= 1 each", prov.Stats().Redials, cons.Stats().Redials)
			}
			// The re-armed watch sees a new provider.
			if err := prov.Register(ctx, provider(svc, 20203)); err != nil {
				t.Fatal(err)
			}
			rec.waitAddrs(ctx, t, addr(20201), addr(20202), addr(20203))
			if n := rec.emptyAfterNonEmpty(); n != 0 {
				t.Fatalf("%d empty lists delivered across the data loss", n)
			}
		})
	}
}

// TestWipedDataRefusalSpotted restarts ZooKeeper with its data wiped
// while the watchdog's timeout is long (refusalWatchdog): the registry sees
// a serving server close its session handshakes and re-dials at once, so
// providers are listed again long before the timeout. Spotting takes 2-3 s
// on a quiet machine. Were it missed, the plain watchdog would re-dial at
// refusalWatchdog and the counts below would say so, well inside the
// test's own bound (refusalBound): the test never waits for ZooKeeper
// longer than that, where a ten-minute watchdog left a missed refusal to
// the 90 s context with nothing but "last list" to show for it.
func TestWipedDataRefusalSpotted(t *testing.T) {
	const refusalWatchdog, refusalBound = 40 * time.Second, 60 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), refusalBound)
	defer cancel()
	zkc := zktest.Start(t)
	svc := iface(t)
	po, co := opts(t, t.TempDir()), opts(t, t.TempDir())
	po.WatchdogTimeout, co.WatchdogTimeout = refusalWatchdog, refusalWatchdog
	co.EmptyGrace = 15 * time.Second
	prov := newRegistry(t, zkc.Address(), po)
	cons := newRegistry(t, zkc.Address(), co)
	if err := prov.Register(ctx, provider(svc, 20251)); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20251))
	s := zkc.Servers[0]
	s.Kill()
	s.WipeData()
	s.Start()
	raw := zktest.Client(t, zkc.Addrs()...)
	waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 1)
	if err := prov.Register(ctx, provider(svc, 20252)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20251), addr(20252))
	for _, r := range []*zookeeper.Registry{prov, cons} {
		if st := r.Stats(); st.RefusedRedials != 1 || st.Redials != 1 {
			t.Errorf("redials %d, refused %d; want 1 and 1", st.Redials, st.RefusedRedials)
		}
	}
	if n := rec.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered across the data loss", n)
	}
}

// TestSessionExpiry partitions clients from ZooKeeper (through a proxy)
// for longer than the session timeout, so the server expires their
// sessions: the provider's ephemeral node is re-created under the new
// session and the consumer's watch is re-armed.
func TestSessionExpiry(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	proxy := zktest.NewProxy(t, zkc.Servers[0].Addr)
	prov := newRegistry(t, "zookeeper://"+proxy.Addr, opts(t, t.TempDir()))
	co := opts(t, t.TempDir())
	logs := observe(&co)
	cons := newRegistry(t, "zookeeper://"+proxy.Addr, co)
	u := provider(svc, 20301)
	if err := prov.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20301))
	oldProv, oldCons := prov.Stats().SessionID, cons.Stats().SessionID
	raw := zktest.Client(t, zkc.Addrs()...)
	pp := prov.CategoryPath(svc, registry.CategoryProviders)

	proxy.Block()
	// The server expires the provider's session and deletes its node.
	waitChildren(ctx, t, raw, pp, 0)
	proxy.Unblock()

	waitFor(ctx, t, "new sessions", func() bool {
		p, c := prov.Stats(), cons.Stats()
		return p.HasSession && c.HasSession && p.SessionID != oldProv && c.SessionID != oldCons
	})
	waitChildren(ctx, t, raw, pp, 1)
	_, st, err := raw.Exists(prov.NodePath(u))
	if err != nil || st.EphemeralOwner != prov.Stats().SessionID {
		t.Fatalf("node owner %v (%v), want the new session %d", st, err, prov.Stats().SessionID)
	}
	// The consumer's subscription works on the new session.
	if err := prov.Register(ctx, provider(svc, 20302)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20301), addr(20302))
	if n := rec.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered across the expiry", n)
	}
	// The consumer logged the expiry and the new session.
	// (Under load the watchdog may re-dial before the server reports the
	// expiry; that is logged too.)
	if n := logs.FilterMessageSnippet("zookeeper session expired").Len() + logs.FilterMessageSnippet("dialling afresh").Len(); n < 1 {
		t.Errorf("no expiry (or re-dial) line logged")
	}
	if n := logs.FilterMessage("zookeeper session established").Len(); n < 2 {
		t.Errorf("%d 'session established' lines logged, want at least 2 (first and new)", n)
	}
}

// TestStaleNodeOfOldSessionReplaced registers a URL whose node is already
// held by another session: the node is replaced by one this session owns.
func TestStaleNodeOfOldSessionReplaced(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	other := zktest.Client(t, zkc.Addrs()...)
	prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	u := provider(svc, 20401)
	p := prov.NodePath(u)
	for _, q := range []string{"/dubbo", "/dubbo/" + svc, prov.CategoryPath(svc, registry.CategoryProviders)} {
		if _, err := other.Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := other.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "session", func() bool { return prov.Stats().HasSession })
	if err := prov.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	_, st, err := other.Exists(p)
	if err != nil || st.EphemeralOwner != prov.Stats().SessionID {
		t.Fatalf("owner %v (%v), want %d", st, err, prov.Stats().SessionID)
	}
}

// TestEnsembleMemberLoss kills the leader, then a follower, of a
// three-server ensemble: registrations stay and changes still arrive.
func TestEnsembleMemberLoss(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.StartEnsemble(t, 3)
	svc := iface(t)
	// Members refuse sessions during a leader election; the watchdog must
	// outlast one (it takes about 1 s).
	po, co := opts(t, t.TempDir()), opts(t, t.TempDir())
	po.WatchdogTimeout, co.WatchdogTimeout = 10*time.Second, 10*time.Second
	prov := newRegistry(t, zkc.Address(), po)
	cons := newRegistry(t, zkc.Address(), co)
	if err := prov.Register(ctx, provider(svc, 20501)); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20501))

	leader := zkc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	leader.Kill()
	if _, err := zkc.WaitLeader(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := prov.Register(ctx, provider(svc, 20502)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20501), addr(20502))
	leader.Start()

	follower := zkc.Follower()
	if follower == nil {
		t.Fatal("no follower")
	}
	follower.Kill()
	if err := prov.Register(ctx, provider(svc, 20503)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20501), addr(20502), addr(20503))
	var up []string
	for _, s := range zkc.Servers {
		if s.Running() {
			up = append(up, s.Addr)
		}
	}
	raw := zktest.Client(t, up...)
	waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 3)
	if n := rec.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered", n)
	}
	if got := prov.Stats().Redials + cons.Stats().Redials; got != 0 {
		t.Fatalf("%d watchdog redials with a quorum up", got)
	}
}

// TestSubscribeWhileDownUsesDiskCache starts a consumer while ZooKeeper is
// down: it gets the list from the cache file another consumer wrote, at
// once, and reconciles when ZooKeeper answers.
func TestSubscribeWhileDownUsesDiskCache(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	cacheDir := t.TempDir()
	prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	for _, p := range []int{20601, 20602} {
		if err := prov.Register(ctx, provider(svc, p)); err != nil {
			t.Fatal(err)
		}
	}
	first := newRegistry(t, zkc.Address(), opts(t, cacheDir))
	rec := newRecorder()
	if err := first.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20601), addr(20602))
	first.Close()
	if _, err := os.Stat(filepath.Join(cacheDir, "cache.json")); err != nil {
		t.Fatalf("cache file: %v", err)
	}

	zkc.Servers[0].Kill()
	// A new registry waits up to RegisterWait for its first session before
	// it serves a cached list, unless every server refuses connections:
	// with ZooKeeper down the list comes at once, not after this long wait
	// (config's Refer gave up on a list first under load when both waits
	// were 5 s).
	so := opts(t, cacheDir)
	so.RegisterWait = 10 * time.Minute
	second := newRegistry(t, zkc.Address(), so)
	rec2 := newRecorder()
	start := time.Now()
	if err := second.Subscribe(consumer(svc), rec2); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Subscribe blocked %v with ZooKeeper down", d)
	}
	rec2.waitAddrs(ctx, t, addr(20601), addr(20602))
	if second.Stats().HasSession {
		t.Fatal("session while ZooKeeper is down")
	}
	zkc.Servers[0].Start()
	waitFor(ctx, t, "session", func() bool { return second.Stats().HasSession })
	if err := prov.Register(ctx, provider(svc, 20603)); err != nil {
		t.Fatal(err)
	}
	rec2.waitAddrs(ctx, t, addr(20601), addr(20602), addr(20603))
	if n := rec2.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered", n)
	}
}

// TestCorruptCacheIgnored starts a registry over a corrupt cache file.
func TestCorruptCacheIgnored(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cache.json"), []byte("{\"version\":1,\"services\":{\"x\":[tru"), 0o600); err != nil {
		t.Fatal(err)
	}
	prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	if err := prov.Register(ctx, provider(svc, 20701)); err != nil {
		t.Fatal(err)
	}
	cons := newRegistry(t, zkc.Address(), opts(t, dir))
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20701))
	// The file is rewritten whole and valid (just after the listeners are
	// told, so that its write never delays them).
	waitFor(ctx, t, "the cache rewritten", func() bool {
		c := registry.OpenCache(filepath.Join(dir, "cache.json"), nil)
		urls, ok := c.Load(consumer(svc).ServiceKey())
		return ok && len(urls) == 1
	})
}

// TestRegisterWhileDown registers while ZooKeeper is down: Register
// returns at once and the node appears when ZooKeeper starts.
func TestRegisterWhileDown(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	zkc.Servers[0].Kill()
	prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := prov.Register(cctx, provider(svc, 20801)); err != nil {
		t.Fatal(err)
	}
	zkc.Servers[0].Start()
	raw := zktest.Client(t, zkc.Addrs()...)
	waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 1)
}

// TestUnregisterDuringOutage unregisters while ZooKeeper is down: the node
// is deleted once ZooKeeper is back (the session survived the outage).
func TestUnregisterDuringOutage(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	// The provider's session must survive the outage, as the test says:
	// a 30 s watchdog, not opts' 3 s (at load 16 the restarted server
	// accepted connections for 3 s before it granted sessions, the
	// watchdog dialled afresh, the new session replaced a's node while
	// the old one still held b's, and the list read [b] for a moment), and
	// the default 10 s session (see TestOutageKeepsLists).
	po := opts(t, t.TempDir())
	po.WatchdogTimeout, po.SessionTimeout = 30*time.Second, zookeeper.DefaultSessionTimeout
	prov := newRegistry(t, zkc.Address(), po)
	cons := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	a, b := provider(svc, 20901), provider(svc, 20902)
	for _, u := range []*protocol.URL{a, b} {
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(20901), addr(20902))
	sid := prov.Stats().SessionID
	zkc.Servers[0].Kill()
	waitFor(ctx, t, "disconnect", func() bool { return !prov.Stats().HasSession })
	start := time.Now()
	if err := prov.Unregister(ctx, b); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Unregister blocked %v while ZooKeeper is down", d)
	}
	zkc.Servers[0].Start()
	raw := zktest.Client(t, zkc.Addrs()...)
	kids := waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 1)
	if kids[0] != a.Escaped() {
		t.Fatalf("left %s, want a", kids[0])
	}
	if st := prov.Stats(); st.SessionID != sid || st.Redials != 0 {
		t.Fatalf("session %x -> %x, %d redials: the session did not survive the outage", sid, st.SessionID, st.Redials)
	}
	rec.waitAddrs(ctx, t, addr(20901))
}

// TestRepeatedRestarts restarts ZooKeeper several times in a row (with its
// data): the registry keeps its lists, never deadlocks, and still sees
// changes afterwards.
func TestRepeatedRestarts(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	svc := iface(t)
	prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	cons := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
	if err := prov.Register(ctx, provider(svc, 21001)); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := cons.Subscribe(consumer(svc), rec); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(21001))
	const cycles = 4
	for i := range cycles {
		zkc.Servers[0].Kill()
		// Changes made while down are retried; the last one wins.
		if i%2 == 0 {
			_ = prov.Register(ctx, provider(svc, 21002))
		} else {
			_ = prov.Unregister(ctx, provider(svc, 21002))
		}
		zkc.Servers[0].Start()
	}
	// After an even number of cycles 21002 was registered then unregistered.
	if err := prov.Register(ctx, provider(svc, 21003)); err != nil {
		t.Fatal(err)
	}
	rec.waitAddrs(ctx, t, addr(21001), addr(21003))
	raw := zktest.Client(t, zkc.Addrs()...)
	waitChildren(ctx, t, raw, prov.CategoryPath(svc, registry.CategoryProviders), 2)
	if n := rec.emptyAfterNonEmpty(); n != 0 {
		t.Fatalf("%d empty lists delivered across %d restarts", n, cycles)
	}
}
