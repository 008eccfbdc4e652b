package zookeeper_test

import (
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// wantACL is the ACL every node gets with credentials app:pw.
func wantACL() []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, "app", "pw"), zk.WorldACL(zk.PermRead)...)
}

func sameACL(a, b []zk.ACL) bool {
	key := func(acl []zk.ACL) []string {
		out := make([]string, len(acl))
		for i, x := range acl {
			// The server hides digests from a client without the
			// identity (CVE-2019-0201): compare the user only.
			id, _, _ := strings.Cut(x.ID, ":")
			out[i] = x.Scheme + ":" + id + ":" + strconv.Itoa(int(x.Perms))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// TestACL registers with digest credentials on a real ZooKeeper and
// attacks the tree with a second client that has none: every node the
// framework created (root, service, category and ephemeral nodes) carries
// the digest ACL with world read, the stranger can read the providers but
// cannot delete, overwrite, add or re-ACL anything, and existing nodes with
// an ACL open to strangers are reported.
func TestACL(t *testing.T) {
	zkc := zktest.Start(t)
	stranger := zktest.Client(t, zkc.Addrs()...)
	secure := func(t *testing.T, root string) zookeeper.Options {
		o := syncOpts(t, t.TempDir())
		o.Root = root
		o.Username, o.Password = "app", "pw"
		return o
	}

	t.Run("StrangerCannotWrite", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		po := secure(t, "acl1")
		prov := newRegistry(t, zkc.Address(), po)
		u := provider(svc, 21001)
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
		cons := newRegistry(t, zkc.Address(), secure(t, "acl1"))
		cu := consumer(svc)
		if err := cons.Register(ctx, cu); err != nil {
			t.Fatal(err)
		}
		node := prov.NodePath(u)
		pp := path.Dir(node)
		cp := path.Dir(cons.NodePath(cu))
		for _, p := range []string{"/acl1", "/acl1/" + svc, pp, node, cp, cons.NodePath(cu)} {
			acl, _, err := stranger.GetACL(p)
			if err != nil || !sameACL(acl, wantACL()) {
				t.Errorf("%s: ACL %v (%v), want %v", p, acl, err, wantACL())
			}
		}
		// Reads work without credentials, where Dubbo's tools read.
		kids, _, err := stranger.Children(pp)
		if err != nil || len(kids) != 1 || kids[0] != u.Escaped() {
			t.Fatalf("stranger lists providers: %v %v, want [%s]", kids, err, u.Escaped())
		}
		// Writes do not.
		evil := provider(svc, 6666)
		attacks := map[string]error{}
		attacks["delete provider"] = stranger.Delete(node, -1)
		_, attacks["overwrite provider"] = stranger.Set(node, []byte("evil"), -1)
		_, attacks["add provider"] = stranger.Create(pp+"/"+evil.Escaped(), nil, 0, zk.WorldACL(zk.PermAll))
		_, attacks["add ephemeral provider"] = stranger.Create(pp+"/"+evil.Escaped(), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		_, attacks["re-ACL provider"] = stranger.SetACL(node, zk.WorldACL(zk.PermAll), -1)
		_, attacks["re-ACL providers node"] = stranger.SetACL(pp, zk.WorldACL(zk.PermAll), -1)
		attacks["delete providers node"] = stranger.Delete(pp, -1)
		attacks["delete consumer"] = stranger.Delete(cons.NodePath(cu), -1)
		_, attacks["add routers node"] = stranger.Create("/acl1/"+svc+"/"+registry.CategoryRouters, nil, 0, zk.WorldACL(zk.PermAll))
		_, attacks["add service"] = stranger.Create("/acl1/evil.Service", nil, 0, zk.WorldACL(zk.PermAll))
		for what, err := range attacks {
			if !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("stranger: %s = %v, want ErrNoAuth", what, err)
			}
		}
		if kids, _, _ := stranger.Children(pp); len(kids) != 1 {
			t.Fatalf("providers after the attacks: %v", kids)
		}
		// A consumer without credentials still subscribes (world read).
		open := newRegistry(t, zkc.Address(), func() zookeeper.Options { o := syncOpts(t, t.TempDir()); o.Root = "acl1"; return o }())
		rec := newRecorder()
		if err := open.Subscribe(consumer(svc), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t, addr(21001))
		// ...but cannot register.
		if err := open.Register(ctx, evil); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("Register without credentials = %v, want ErrNoAuth", err)
		}
		for _, r := range []*zookeeper.Registry{prov, cons, open} {
			if n := r.Stats().Exposed; n != 0 {
				t.Errorf("Exposed = %d (%v), want 0: every node is ours", n, r.Exposed())
			}
		}
	})

	t.Run("PrivateRead", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		o := secure(t, "acl2")
		o.PrivateRead = true
		prov := newRegistry(t, zkc.Address(), o)
		u := provider(svc, 21011)
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/acl2", path.Dir(prov.NodePath(u)), prov.NodePath(u)} {
			if _, _, err := stranger.Children(p); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("stranger lists %s: %v, want ErrNoAuth", p, err)
			}
		}
		if err := stranger.Delete(prov.NodePath(u), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("stranger deletes provider: %v, want ErrNoAuth", err)
		}
	})

	t.Run("OpenParentReported", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		// A stranger got there first and left the root and the service
		// node open to anyone.
		for _, p := range []string{"/acl3", "/acl3/" + svc} {
			if _, err := stranger.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		o := secure(t, "acl3")
		logs := observe(&o)
		prov := newRegistry(t, zkc.Address(), o)
		waitFor(ctx, t, "the root reported", func() bool { return prov.Stats().Exposed == 1 })
		u := provider(svc, 21021)
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range prov.Exposed() {
			got = append(got, e.Path)
			if len(e.ACL) != 1 || e.ACL[0].Scheme != "world" {
				t.Errorf("%s: reported ACL %v", e.Path, e.ACL)
			}
		}
		if want := []string{"/acl3", "/acl3/" + svc}; !slices.Equal(got, want) || prov.Stats().Exposed != 2 {
			t.Fatalf("Exposed() = %v (count %d), want %v", got, prov.Stats().Exposed, want)
		}
		if n := logs.FilterMessageSnippet("lets anyone change it").Len(); n != 2 {
			t.Errorf("%d warnings logged, want 2", n)
		}
		// The node the registry created below them is closed all the same.
		pp := path.Dir(prov.NodePath(u))
		if acl, _, err := stranger.GetACL(pp); err != nil || !sameACL(acl, wantACL()) {
			t.Errorf("%s: ACL %v (%v)", pp, acl, err)
		}
		// Registering again reports nothing new.
		if err := prov.Register(ctx, provider(svc, 21022)); err != nil {
			t.Fatal(err)
		}
		if n := prov.Stats().Exposed; n != 2 {
			t.Errorf("Exposed = %d after a second registration, want 2", n)
		}

		// A consumer with credentials reports an open providers node a
		// stranger could add providers to.
		svc2 := svc + ".open"
		for _, p := range []string{"/acl3/" + svc2, "/acl3/" + svc2 + "/providers"} {
			if _, err := stranger.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		cons := newRegistry(t, zkc.Address(), secure(t, "acl3"))
		rec := newRecorder()
		if err := cons.Subscribe(consumer(svc2), rec); err != nil {
			t.Fatal(err)
		}
		rec.waitAddrs(ctx, t)
		waitFor(ctx, t, "the open service nodes reported", func() bool { return cons.Stats().Exposed == 3 })

		// Without credentials the registry's own ACL is open: nothing is
		// reported.
		openO := opts(t, t.TempDir())
		openO.Root = "acl3"
		open := newRegistry(t, zkc.Address(), openO)
		if err := open.Register(ctx, provider(svc+".plain", 21023)); err != nil {
			t.Fatal(err)
		}
		if n := open.Stats().Exposed; n != 0 {
			t.Errorf("Exposed without credentials = %d, want 0", n)
		}
	})

	t.Run("ExpiryKeepsACL", func(t *testing.T) {
		ctx := testCtx(t)
		svc := iface(t)
		proxy := zktest.NewProxy(t, zkc.Servers[0].Addr)
		prov := newRegistry(t, "zookeeper://"+proxy.Addr, secure(t, "acl4"))
		u := provider(svc, 21031)
		if err := prov.Register(ctx, u); err != nil {
			t.Fatal(err)
		}
		old := prov.Stats().SessionID
		pp := path.Dir(prov.NodePath(u))
		proxy.Block()
		waitChildren(ctx, t, stranger, pp, 0) // the server expired the session
		proxy.Unblock()
		waitFor(ctx, t, "a new session", func() bool {
			s := prov.Stats()
			return s.HasSession && s.SessionID != old
		})
		waitChildren(ctx, t, stranger, pp, 1)
		acl, st, err := stranger.GetACL(prov.NodePath(u))
		if err != nil || !sameACL(acl, wantACL()) || st.EphemeralOwner != prov.Stats().SessionID {
			t.Fatalf("re-created node: ACL %v owner %v (%v), want %v of session %d", acl, st, err, wantACL(), prov.Stats().SessionID)
		}
		if err := stranger.Delete(prov.NodePath(u), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("stranger deletes the re-created node: %v, want ErrNoAuth", err)
		}
	})
}
