package zookeeper_test

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// bigChildren is how many providers the big node holds.
const bigChildren = 20000

// fillProviders creates n provider nodes of about 260 bytes each under pp
// (so listing them takes more than go-zookeeper's old 4 MiB), in Multi
// batches, and returns the bytes a listing of their names takes.
func fillProviders(t *testing.T, c *zk.Conn, svc, pp string, n int) int {
	t.Helper()
	for _, p := range []string{"/dubbo", path.Dir(pp), pp} {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	total := 0
	names := make([]string, n)
	for j := range names {
		u := protocol.NewURL("dubbo", fmt.Sprintf("10.%d.%d.%d", j>>16, (j>>8)&255, j&255), 20880, svc, map[string]string{
			protocol.KeyInterface: svc, "pad": strings.Repeat("p", 150),
		})
		names[j] = u.Escaped()
		total += len(names[j]) + 4
	}
	if err := zktest.CreateChildren(c, pp, names); err != nil {
		t.Fatal(err)
	}
	return total
}

// received returns the packets the server has received so far (srvr).
func received(t *testing.T, s *zktest.Server) int {
	t.Helper()
	out, err := zktest.FourLetter(s.Addr, "srvr", 2*time.Second)
	if err != nil {
		t.Fatalf("srvr: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Received: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("srvr: no Received line in %q", out)
	return 0
}

// TestBigProvidersNode puts 20,000 providers (about 5.6 MB of names) under
// one service's providers node of a real ZooKeeper. A registry client
// subscribed to that service and to a small one keeps getting the small
// one's updates on the same session: the big node is reported and skipped
// (by its child count, or after one listing over the buffer), never listed
// again in a loop; with a raised buffer and bound it is listed whole.
func TestBigProvidersNode(t *testing.T) {
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	big := "test.big.Service"
	pp := "/dubbo/" + big + "/" + registry.CategoryProviders
	start := time.Now()
	size := fillProviders(t, raw, big, pp, bigChildren)
	t.Logf("created %d children (%d bytes of names) in %v", bigChildren, size, time.Since(start).Round(time.Millisecond))
	if size <= 4<<20 {
		t.Fatalf("names take %d bytes, want more than 4 MiB", size)
	}

	// run subscribes a registry with o to the big service and a small one,
	// and checks the small one's updates arrive while the big one is
	// skipped; it returns the registry.
	run := func(t *testing.T, o zookeeper.Options, wantDrops uint64) *zookeeper.Registry {
		ctx := testCtx(t)
		small := iface(t)
		logs := observe(&o)
		cons := newRegistry(t, zkc.Address(), o)
		prov := newRegistry(t, zkc.Address(), opts(t, t.TempDir()))
		if err := prov.Register(ctx, provider(small, 22001)); err != nil {
			t.Fatal(err)
		}
		bigRec, smallRec := newRecorder(), newRecorder()
		if err := cons.Subscribe(consumer(big), bigRec); err != nil {
			t.Fatal(err)
		}
		if err := cons.Subscribe(consumer(small), smallRec); err != nil {
			t.Fatal(err)
		}
		smallRec.waitAddrs(ctx, t, addr(22001))
		waitFor(ctx, t, "the big node reported", func() bool { return cons.Stats().Oversized == 1 })
		sid := cons.Stats().SessionID
		before := received(t, zkc.Servers[0])
		// The small service's changes keep arriving.
		for i := range 5 {
			if err := prov.Register(ctx, provider(small, 22002+i)); err != nil {
				t.Fatal(err)
			}
			want := []string{addr(22001)}
			for j := 0; j <= i; j++ {
				want = append(want, addr(22002+j))
			}
			smallRec.waitAddrs(ctx, t, want...)
		}
		// Watch for a while: no retry loop on the big node.
		window := time.NewTimer(3 * time.Second)
		select {
		case <-window.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		pkts := received(t, zkc.Servers[0]) - before
		st := cons.Stats()
		t.Logf("server received %d packets in the window; stats %+v", pkts, st)
		if st.Oversized != 1 || st.OversizedResponses != wantDrops {
			t.Errorf("oversized %d (want 1), responses over the buffer %d (want %d)", st.Oversized, st.OversizedResponses, wantDrops)
		}
		if st.SessionID != sid || st.Sessions != 1 || !st.HasSession {
			t.Errorf("session changed: %+v (was %d)", st, sid)
		}
		// Two registries' pings and five registrations with their
		// listings take a few dozen packets; a loop takes hundreds.
		if pkts > 120 {
			t.Errorf("server received %d packets in the 3 s window, want a bounded few", pkts)
		}
		if _, n := bigRec.last(); n != 0 {
			t.Errorf("the big node's listener got %d lists, want none", n)
		}
		if n := logs.FilterMessageSnippet("too big to list").Len(); n != 1 {
			t.Errorf("%d 'too big' warnings, want 1", n)
		}
		return cons
	}

	t.Run("OverMaxChildren", func(t *testing.T) {
		// Defaults: 20,000 children > 10,000. The Stat says so; the node
		// is never listed, the connection never dropped.
		o := opts(t, t.TempDir())
		run(t, o, 0)
	})

	t.Run("OverBuffer", func(t *testing.T) {
		// Within the children bound but over a 2 MiB buffer: one listing
		// overflows, go-zookeeper drops the connection once, the session
		// survives and the node is skipped from then on.
		o := opts(t, t.TempDir())
		o.MaxChildren = 100000
		o.MaxBufferSize = 2 << 20
		run(t, o, 1)
	})

	t.Run("RaisedBuffer", func(t *testing.T) {
		ctx := testCtx(t)
		o := opts(t, t.TempDir())
		o.MaxChildren = 50000
		cons := newRegistry(t, zkc.Address(), o)
		rec := newRecorder()
		start := time.Now()
		if err := cons.Subscribe(consumer(big), rec); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the big list", func() bool { got, n := rec.last(); return n > 0 && len(got) == bigChildren })
		t.Logf("%d providers listed and delivered %v after Subscribe", bigChildren, time.Since(start).Round(time.Millisecond))
		if st := cons.Stats(); st.Oversized != 0 || st.OversizedResponses != 0 {
			t.Fatalf("stats %+v, want nothing oversized", st)
		}
	})
}
