package config_test

import (
	"bufio"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/zktest"
)

// underLoad is where the E2E tests that break something begin: one
// ZooKeeper server (zkc, and raw, a client of its own), providers A and B
// listed in it, and a consumer calling them with a load both have
// answered.
type underLoad struct {
	zkc          *zktest.Cluster
	raw          *zk.Conn
	addrA, addrB string
	l            *load
}

// startUnderLoad starts an underLoad whose load has workers callers.
func startUnderLoad(ctx context.Context, t *testing.T, workers int) underLoad {
	t.Helper()
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	_, addrB := startProvider(ctx, t, zkc.Address(), "B")
	waitProviders(ctx, t, raw, addrA, addrB) // see startProvider
	_, c := startConsumer(ctx, t, zkc.Address(), t.TempDir())
	l := startLoad(ctx, c, workers)
	l.waitServedBy(ctx, t, "A", "B")
	return underLoad{zkc: zkc, raw: raw, addrA: addrA, addrB: addrB, l: l}
}

// A provider appears under /dubbo/{interface}/providers; a consumer sees a
// new provider and a departed one; a graceful stop of one of two providers
// under load fails no call and removes its node.
func TestE2EProvidersComeAndGoUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	waitProviders(ctx, t, raw, addrA)

	_, c := startConsumer(ctx, t, zkc.Address(), t.TempDir())
	l := startLoad(ctx, c, 4)
	l.waitServedBy(ctx, t, "A")

	appB, addrB := startProvider(ctx, t, zkc.Address(), "B")
	waitProviders(ctx, t, raw, addrA, addrB)
	l.waitServedBy(ctx, t, "A", "B") // the consumer saw the new provider

	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := appB.Shutdown(sctx); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	waitProviders(ctx, t, raw, addrA)
	l.waitCalls(ctx, t, 200)
	by := l.finish()
	// After B left, only A answers.
	before := by["B"]
	l2 := startLoad(ctx, c, 2)
	l2.waitCalls(ctx, t, 200)
	if got := l2.finish()["B"]; got != 0 {
		t.Fatalf("departed provider B answered %d calls", got)
	}
	l.requireNoFailures(t)
	l2.requireNoFailures(t)
	t.Logf("B answered %d calls before it left", before)
}

// ZooKeeper killed for 10 s under steady load: no call fails, and the same
// providers are listed afterwards.
func TestE2EZooKeeperDownUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	u := startUnderLoad(ctx, t, 4)
	zkc, raw, addrA, addrB, l := u.zkc, u.raw, u.addrA, u.addrB, u.l

	zkc.Servers[0].Kill()
	outage := time.NewTimer(10 * time.Second)
	l.waitServedBy(ctx, t, "A", "B") // calls go on while ZooKeeper is down
	select {
	case <-outage.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	l.waitServedBy(ctx, t, "A", "B")
	zkc.Servers[0].Start()
	waitProviders(ctx, t, raw, addrA, addrB)
	l.waitServedBy(ctx, t, "A", "B")
	l.requireNoFailures(t)
}

// ZooKeeper restarted with its data wiped: providers re-register, the
// consumer keeps calling both, no call fails.
func TestE2EZooKeeperDataWiped(t *testing.T) {
	ctx := testCtx(t)
	u := startUnderLoad(ctx, t, 4)
	zkc, raw, addrA, addrB, l := u.zkc, u.raw, u.addrA, u.addrB, u.l

	zkc.Servers[0].Kill()
	zkc.Servers[0].WipeData()
	zkc.Servers[0].Start()
	restarted := time.Now()
	waitProviders(ctx, t, raw, addrA, addrB)
	t.Logf("providers listed again %v after the wiped server was serving", time.Since(restarted).Round(10*time.Millisecond))
	l.waitServedBy(ctx, t, "A", "B")
	// A third provider registered now reaches the consumer: its
	// subscription works on the new server.
	_, addrC := startProvider(ctx, t, zkc.Address(), "C")
	waitProviders(ctx, t, raw, addrA, addrB, addrC)
	l.waitServedBy(ctx, t, "A", "B", "C")
	l.requireNoFailures(t)
}

// Sessions expired (clients cut off from ZooKeeper through a proxy for
// longer than the session timeout): ephemeral nodes are re-created, the
// watch is re-armed, no call fails.
func TestE2ESessionExpiry(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	proxy := zktest.NewProxy(t, zkc.Servers[0].Addr)
	via := "zookeeper://" + proxy.Addr
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, via, "A")
	kids := waitProviders(ctx, t, raw, addrA) // see startProvider
	_, c := startConsumer(ctx, t, via, t.TempDir())
	l := startLoad(ctx, c, 4)
	l.waitServedBy(ctx, t, "A")
	_, st, err := raw.Exists(providersPath + "/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	oldOwner := st.EphemeralOwner

	proxy.Block()
	waitProviders(ctx, t, raw) // the server expired the provider's session
	l.waitServedBy(ctx, t, "A")
	proxy.Unblock()

	kids = waitProviders(ctx, t, raw, addrA)
	_, st, err = raw.Exists(providersPath + "/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner == oldOwner {
		t.Fatalf("node still owned by the expired session %x", oldOwner)
	}
	// The consumer's watch works again: a new provider reaches it.
	_, addrB := startProvider(ctx, t, via, "B")
	waitProviders(ctx, t, raw, addrA, addrB)
	l.waitServedBy(ctx, t, "A", "B")
	l.requireNoFailures(t)
}

// One of three ensemble members killed, the leader and then a follower: no
// call fails and the registry keeps working.
func TestE2EEnsembleMemberLoss(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.StartEnsemble(t, 3)
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	waitProviders(ctx, t, raw, addrA) // see startProvider
	_, c := startConsumer(ctx, t, zkc.Address(), t.TempDir())
	l := startLoad(ctx, c, 4)
	l.waitServedBy(ctx, t, "A")

	leader := zkc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	leader.Kill()
	if _, err := zkc.WaitLeader(ctx, leader); err != nil {
		t.Fatal(err)
	}
	_, addrB := startProvider(ctx, t, zkc.Address(), "B")
	waitProviders(ctx, t, raw, addrA, addrB)
	l.waitServedBy(ctx, t, "A", "B")
	leader.Start()

	follower := zkc.Follower()
	if follower == nil {
		t.Fatal("no follower")
	}
	follower.Kill()
	_, addrC := startProvider(ctx, t, zkc.Address(), "C")
	waitProviders(ctx, t, raw, addrA, addrB, addrC)
	l.waitServedBy(ctx, t, "A", "B", "C")
	l.requireNoFailures(t)
}

// A consumer started while ZooKeeper is down calls the providers it finds
// in its disk cache.
func TestE2EConsumerStartsWhileZooKeeperDown(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	_, addrB := startProvider(ctx, t, zkc.Address(), "B")
	waitProviders(ctx, t, raw, addrA, addrB) // see startProvider
	cacheDir := t.TempDir()
	first, c := startConsumer(ctx, t, zkc.Address(), cacheDir)
	l := startLoad(ctx, c, 2)
	l.waitServedBy(ctx, t, "A", "B")
	l.requireNoFailures(t)
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	zkc.Servers[0].Kill()
	_, c2 := startConsumer(ctx, t, zkc.Address(), cacheDir)
	l2 := startLoad(ctx, c2, 2)
	l2.waitServedBy(ctx, t, "A", "B")
	l2.requireNoFailures(t)
}

// Malformed children under the providers node are ignored; the good
// provider is still served.
func TestE2EMalformedProviderNode(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	_, addrA := startProvider(ctx, t, zkc.Address(), "A")
	waitProviders(ctx, t, raw, addrA)
	for _, bad := range []string{"not-a-url", "dubbo%3A%2F%2F%3Abad-port%2Fx", "%ZZ"} {
		if _, err := raw.Create(providersPath+"/"+bad, []byte{0xff, 0x00}, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", bad, err)
		}
	}
	_, c := startConsumer(ctx, t, zkc.Address(), t.TempDir())
	l := startLoad(ctx, c, 2)
	l.waitServedBy(ctx, t, "A")
	l.waitCalls(ctx, t, 100)
	l.requireNoFailures(t)
}

// A condition rule written into the service's routers node in ZooKeeper
// (as Dubbo's admin tools do) steers calls while they run, and removing it
// restores the spread.
func TestE2ERoutingRuleFromRegistry(t *testing.T) {
	ctx := testCtx(t)
	u := startUnderLoad(ctx, t, 2)
	raw, addrB, l := u.raw, u.addrB, u.l

	_, portB, _ := strings.Cut(addrB, ":")
	rule := url.QueryEscape("method = Who => port = " + portB)
	node := "/dubbo/" + e2eInterface + "/routers/" + url.QueryEscape("condition://0.0.0.0/"+e2eInterface+"?category=routers&force=true&rule="+rule)
	for _, p := range []string{"/dubbo/" + e2eInterface + "/routers"} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := raw.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// Wait until only B answers: 200 calls in a row with none from A.
	waitFor(ctx, t, "the rule to apply", func() bool {
		before := l.snapshot()["A"]
		l.waitCalls(ctx, t, 200)
		return l.snapshot()["A"] == before
	})
	if err := raw.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	l.waitServedBy(ctx, t, "A", "B")
	l.requireNoFailures(t)
}

// A provider that crashes while ZooKeeper is down keeps its node (its
// session outlives the outage by up to a session timeout), but is never
// chosen: its connection is dead. Under steady load, calls succeed on the
// other provider during the outage and after ZooKeeper returns, until the
// node goes.
func TestE2EProviderCrashWhileZooKeeperDown(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	// A runs in its own process, so that it can really crash.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=provider", "MINIDUBBO_NAME=A", "MINIDUBBO_ZK="+zkc.Address())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "ready ") {
		t.Fatalf("provider A: %q", sc.Text())
	}
	addrA := strings.TrimPrefix(sc.Text(), "ready ")
	_, addrB := startProvider(ctx, t, zkc.Address(), "B")
	waitProviders(ctx, t, raw, addrA, addrB)
	_, c := startConsumer(ctx, t, zkc.Address(), t.TempDir())
	l := startLoad(ctx, c, 4)
	l.waitServedBy(ctx, t, "A", "B")

	zkc.Servers[0].Kill()
	l.waitServedBy(ctx, t, "A", "B")
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no unregistering, no goodbye
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// An answer A sent just before it died may still be on its way to its
	// caller: count A's answers once more calls have ended.
	l.waitCalls(ctx, t, 50)
	servedA := l.snapshot()["A"]
	l.waitCalls(ctx, t, 500) // only B can answer these
	zkc.Servers[0].Start()
	// A's node is listed again until its session expires; the consumer
	// re-lists it meanwhile and must not choose it.
	l.waitCalls(ctx, t, 500)
	waitProviders(ctx, t, raw, addrB)
	l.waitCalls(ctx, t, 200)
	if got := l.snapshot()["A"]; got != servedA {
		t.Fatalf("crashed provider A answered %d calls", got-servedA)
	}
	l.requireNoFailures(t)
}
