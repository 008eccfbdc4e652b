package registry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInvoker answers with its address; while gate is set, calls wait on it.
type fakeInvoker struct {
	u         *protocol.URL
	available atomic.Bool
	closes    atomic.Int32
	calls     atomic.Int64
	started   chan struct{}
	gate      chan struct{}
}

func (f *fakeInvoker) URL() *protocol.URL { return f.u }
func (f *fakeInvoker) Available() bool    { return f.available.Load() }
func (f *fakeInvoker) Close() error       { f.closes.Add(1); return nil }
func (f *fakeInvoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	if f.closes.Load() > 0 {
		return nil, errors.New("fake: invoker closed")
	}
	f.calls.Add(1)
	if f.gate != nil {
		f.started <- struct{}{}
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &protocol.Result{Value: f.u.Address()}, nil
}

// fakeProtocol refers fakeInvokers and remembers them.
type fakeProtocol struct {
	mu      sync.Mutex
	refers  int
	byAddr  map[string][]*fakeInvoker
	failFor map[int]bool // ports whose Refer fails
	gated   map[int]chan struct{}
}

func newFakeProtocol() *fakeProtocol {
	return &fakeProtocol{byAddr: map[string][]*fakeInvoker{}, failFor: map[int]bool{}, gated: map[int]chan struct{}{}}
}

func (p *fakeProtocol) Export(protocol.Invoker) (protocol.Exporter, error) {
	return nil, errors.New("not supported")
}
func (p *fakeProtocol) Close() error { return nil }
func (p *fakeProtocol) Refer(u *protocol.URL) (protocol.Invoker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failFor[u.Port] {
		return nil, fmt.Errorf("refer %s: refused", u.Address())
	}
	p.refers++
	f := &fakeInvoker{u: u, started: make(chan struct{}, 16), gate: p.gated[u.Port]}
	f.available.Store(true)
	p.byAddr[u.Address()] = append(p.byAddr[u.Address()], f)
	return f, nil
}

func (p *fakeProtocol) invoker(port int) *fakeInvoker {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.byAddr[fmt.Sprintf("127.0.0.1:%d", port)]
	if len(l) == 0 {
		return nil
	}
	return l[len(l)-1]
}

func prov(port int, kv ...string) *protocol.URL {
	p := map[string]string{protocol.KeyInterface: "demo.Greeter"}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return protocol.NewURL("dubbo", "127.0.0.1", port, "demo.Greeter", p)
}

func cons(kv ...string) *protocol.URL {
	p := map[string]string{protocol.KeyInterface: "demo.Greeter", protocol.KeySide: "consumer"}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return protocol.NewURL("consumer", "127.0.0.1", 0, "demo.Greeter", p)
}

func newDir(t *testing.T, p protocol.Protocol, drain time.Duration, kv ...string) *registry.Directory {
	t.Helper()
	d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(kv...), Protocol: p, DrainTimeout: drain, Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// waitFor polls cond every 5 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func waitClosed(t *testing.T, f *fakeInvoker) {
	t.Helper()
	waitFor(t, f.u.Address()+" closed", func() bool { return f.closes.Load() > 0 })
}

func ports(invs []protocol.Invoker) []int {
	out := make([]int, len(invs))
	for i, inv := range invs {
		out[i] = inv.URL().Port
	}
	return out
}

func unwrap(inv protocol.Invoker) protocol.Invoker {
	if u, ok := inv.(interface{ Unwrap() protocol.Invoker }); ok {
		return u.Unwrap()
	}
	return inv
}

func TestDirectoryReusesKeptInvokers(t *testing.T) {
	p := newFakeProtocol()
	d := newDir(t, p, time.Second)
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	l := d.Snapshot().Invokers()
	if got := ports(l); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("list = %v", got)
	}
	a := unwrap(l[0])
	d.Notify([]*protocol.URL{prov(1), prov(2), prov(3)})
	l = d.Snapshot().Invokers()
	if got := ports(l); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("list = %v", got)
	}
	if unwrap(l[0]) != a {
		t.Fatal("invoker of a kept provider was replaced")
	}
	if p.refers != 3 {
		t.Fatalf("refers = %d, want 3", p.refers)
	}
	// A provider whose URL changed (weight) is a new invoker; the old one closes.
	d.Notify([]*protocol.URL{prov(1, "weight", "50"), prov(2), prov(3)})
	waitClosed(t, a.(*fakeInvoker))
	if p.refers != 4 || a.(*fakeInvoker).closes.Load() != 1 {
		t.Fatalf("refers = %d closes = %d, want 4 and 1", p.refers, a.(*fakeInvoker).closes.Load())
	}
}

func TestDirectoryFiltersVersionAndGroup(t *testing.T) {
	p := newFakeProtocol()
	d := newDir(t, p, time.Second, "version", "1.0", "group", "a,b")
	d.Notify([]*protocol.URL{
		prov(1, "version", "1.0", "group", "a"),
		prov(2, "version", "1.0", "group", "b"),
		prov(3, "version", "2.0", "group", "a"),
		prov(4, "version", "1.0", "group", "c"),
		prov(5, "version", "1.0"),
		prov(6, "version", "1.0", "group", "a", "enabled", "false"),
	})
	l := d.Snapshot().Invokers()
	if got := ports(l); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("list = %v, want [1 2]", got)
	}
}

func TestDirectoryDrainsDepartedProvider(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := newFakeProtocol()
	gate := make(chan struct{})
	p.gated[1] = gate
	d := newDir(t, p, time.Minute)
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	l := d.Snapshot().Invokers()
	a := p.invoker(1)
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := l[0].Invoke(ctx, &protocol.Invocation{Method: "Hi"})
			errc <- err
		}()
	}
	<-a.started
	<-a.started
	changed := d.Changed()
	d.Notify([]*protocol.URL{prov(2)})
	<-changed
	l2 := d.Snapshot().Invokers()
	if got := ports(l2); fmt.Sprint(got) != "[2]" {
		t.Fatalf("after removal list = %v, want [2]", got)
	}
	if n := a.closes.Load(); n != 0 {
		t.Fatalf("departed invoker closed with 2 calls in flight (closes=%d)", n)
	}
	if d.Retiring() != 1 {
		t.Fatalf("retiring = %d, want 1", d.Retiring())
	}
	close(gate)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("in-flight call failed: %v", err)
		}
	}
	waitClosed(t, a)
	if n := a.closes.Load(); n != 1 {
		t.Fatalf("closes = %d after the calls finished, want 1", n)
	}
	for d.Retiring() != 0 { // the invoker is closed just before it leaves the retiring set
		select {
		case <-ctx.Done():
			t.Fatalf("retiring = %d, want 0", d.Retiring())
		case <-time.After(time.Millisecond):
		}
	}
}

func TestDirectoryDrainTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := newFakeProtocol()
	gate := make(chan struct{})
	defer close(gate)
	p.gated[1] = gate
	d := newDir(t, p, 50*time.Millisecond)
	d.Notify([]*protocol.URL{prov(1)})
	l := d.Snapshot().Invokers()
	a := p.invoker(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l[0].Invoke(ctx, &protocol.Invocation{Method: "Hang"})
	}()
	<-a.started
	d.Notify([]*protocol.URL{prov(2)}) // 1 departs
	// The stuck call does not keep the invoker open past the drain timeout.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for a.closes.Load() == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("invoker not closed after the drain timeout")
		}
	}
	cancel()
	<-done
	if n := a.closes.Load(); n != 1 {
		t.Fatalf("closes = %d, want 1", n)
	}
}

// TestDirectoryAvailability: the directory lists every invoker, up or
// down, and a snapshot lasts until the list changes; the cluster invoker
// is the one that skips those whose connection is down.
func TestDirectoryAvailability(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := newFakeProtocol()
	d := newDir(t, p, time.Second)
	d.Notify([]*protocol.URL{prov(1), prov(2), prov(3)})
	s := d.Snapshot()
	p.invoker(2).available.Store(false)
	if d.Snapshot() != s || len(s.Invokers()) != 3 {
		t.Fatalf("availability changed the snapshot: %v", ports(d.Snapshot().Invokers()))
	}
	if n := testing.AllocsPerRun(100, func() { _ = d.Snapshot() }); n != 0 {
		t.Fatalf("Snapshot allocates %v per call", n)
	}
	c, err := cluster.New(d, cluster.Options{LoadBalance: "roundrobin"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 6 {
		if _, err := c.Invoke(ctx, &protocol.Invocation{Method: "Hi"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := []int64{p.invoker(1).calls.Load(), p.invoker(2).calls.Load(), p.invoker(3).calls.Load()}; fmt.Sprint(got) != "[3 0 3]" {
		t.Fatalf("calls = %v, want [3 0 3]", got)
	}
	p.invoker(1).available.Store(false)
	p.invoker(3).available.Store(false)
	if _, err := c.Invoke(ctx, &protocol.Invocation{Method: "Hi"}); !errors.Is(err, cluster.ErrNoProvider) {
		t.Fatalf("all down: err = %v, want ErrNoProvider", err)
	}
	d.Notify([]*protocol.URL{prov(1), prov(2), prov(3), prov(4)})
	if s2 := d.Snapshot(); s2.Version() <= s.Version() || len(s2.Invokers()) != 4 {
		t.Fatalf("new list: version %d after %d, %d invokers", s2.Version(), s.Version(), len(s2.Invokers()))
	}
}

func TestDirectoryReferFailures(t *testing.T) {
	p := newFakeProtocol()
	p.failFor[9] = true
	d := newDir(t, p, time.Second)
	d.Notify([]*protocol.URL{prov(1), prov(9)})
	l := d.Snapshot().Invokers()
	if got := ports(l); fmt.Sprint(got) != "[1]" {
		t.Fatalf("list = %v, want [1]", got)
	}
	// A list of which nothing can be referred keeps the old invokers.
	d.Notify([]*protocol.URL{prov(9)})
	l = d.Snapshot().Invokers()
	if got := ports(l); fmt.Sprint(got) != "[1]" {
		t.Fatalf("list = %v, want [1] kept", got)
	}
	// An empty list, with no provider of the last list healthy (so
	// empty protection keeps none), empties the directory and closes the
	// invokers.
	p.invoker(1).available.Store(false)
	d.Notify(nil)
	if l := d.Snapshot().Invokers(); len(l) != 0 {
		t.Fatalf("list = %v, want empty", ports(l))
	}
	waitClosed(t, p.invoker(1))
	if n := p.invoker(1).closes.Load(); n != 1 {
		t.Fatalf("closes = %d, want 1", n)
	}
}

func TestDirectoryCloseWaitsForCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := newFakeProtocol()
	gate := make(chan struct{})
	p.gated[1] = gate
	d := newDir(t, p, 5*time.Second)
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	l := d.Snapshot().Invokers()
	a := p.invoker(1)
	errc := make(chan error, 1)
	go func() {
		_, err := l[0].Invoke(ctx, &protocol.Invocation{Method: "Hi"})
		errc <- err
	}()
	<-a.started
	closed := make(chan struct{})
	go func() {
		d.Close()
		close(closed)
	}()
	// Close retires the idle invoker at once; wait for that.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for p.invoker(2).closes.Load() == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("idle invoker not closed")
		}
	}
	select {
	case <-closed:
		t.Fatal("Close returned with a call in flight")
	default:
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	<-closed
	if a.closes.Load() != 1 || p.invoker(2).closes.Load() != 1 {
		t.Fatalf("closes: %d %d, want 1 1", a.closes.Load(), p.invoker(2).closes.Load())
	}
	// Lists after Close are ignored.
	d.Notify([]*protocol.URL{prov(3)})
	if l := d.Snapshot().Invokers(); len(l) != 0 {
		t.Fatal("list after Close")
	}
}

func TestDirectoryOverMemoryRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reg := memory.New()
	defer reg.Close()
	p := newFakeProtocol()
	d := newDir(t, p, time.Second)
	if err := reg.Subscribe(cons(), d); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	changed := d.Changed()
	if err := reg.Register(ctx, prov(7)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no change")
	}
	l := d.Snapshot().Invokers()
	res, err := l[0].Invoke(ctx, &protocol.Invocation{Method: "Hi"})
	if err != nil || res.Value != "127.0.0.1:7" {
		t.Fatalf("call: %v %v", res, err)
	}
}

// TestDirectoryConcurrentNotifyListInvoke hammers List and Invoke while the
// provider list changes; run with -race. Every call must succeed: a
// departed invoker finishes the calls already handed to it.
func TestDirectoryConcurrentNotifyListInvoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := newFakeProtocol()
	// A caller may hold a snapshot for a while before it invokes: Linger
	// keeps a departed invoker open that long. The default 1 s was not
	// enough under -race with the load average at 18 (1 of 116,085 calls
	// found its invoker closed); 5 s is.
	d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: p,
		DrainTimeout: 5 * time.Second, Linger: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				l := d.Snapshot().Invokers()
				if len(l) == 0 {
					failures.Add(1)
					continue
				}
				if _, err := l[int(calls.Load())%len(l)].Invoke(ctx, &protocol.Invocation{Method: "Hi"}); err != nil {
					failures.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	lists := [][]*protocol.URL{
		{prov(1), prov(2)}, {prov(2), prov(3)}, {prov(3)}, {prov(1), prov(3), prov(4)}, {prov(4), prov(5)},
	}
	for i := range 500 {
		d.Notify(lists[i%len(lists)])
	}
	close(stop)
	wg.Wait()
	waitFor(t, "departed invokers closed", func() bool { return d.Retiring() == 0 })
	if failures.Load() != 0 {
		t.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
	// Every invoker that left was closed exactly once.
	p.mu.Lock()
	defer p.mu.Unlock()
	live := map[*fakeInvoker]bool{}
	for _, inv := range d.Snapshot().Invokers() {
		live[unwrap(inv).(*fakeInvoker)] = true
	}
	for _, fs := range p.byAddr {
		for _, f := range fs {
			want := int32(1)
			if live[f] {
				want = 0
			}
			if got := f.closes.Load(); got != want {
				t.Fatalf("%s closed %d times, want %d", f.u.Address(), got, want)
			}
		}
	}
	t.Logf("%d calls, %d refers across 500 lists", calls.Load(), p.refers)
}

func BenchmarkDirectoryList(b *testing.B) {
	p := newFakeProtocol()
	d, _ := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: p})
	defer d.Close()
	d.Notify([]*protocol.URL{prov(1), prov(2), prov(3), prov(4), prov(5)})
	b.ReportAllocs()
	for b.Loop() {
		_ = d.Snapshot().Invokers()
	}
}

// BenchmarkDirectoryInvoke measures List plus a call through the in-flight
// counting wrapper, against calling the fake invoker directly.
func BenchmarkDirectoryInvoke(b *testing.B) {
	p := newFakeProtocol()
	d, _ := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: p})
	defer d.Close()
	d.Notify([]*protocol.URL{prov(1), prov(2), prov(3)})
	ctx := context.Background()
	inv := &protocol.Invocation{Method: "Hi"}
	b.Run("direct", func(b *testing.B) {
		f := p.invoker(1)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = f.Invoke(ctx, inv)
		}
	})
	b.Run("directory", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l := d.Snapshot().Invokers()
			_, _ = l[0].Invoke(ctx, inv)
		}
	})
}

// Provider-list changes are logged at info, naming what came and went.
func TestDirectoryLogsChanges(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: newFakeProtocol(), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Notify(nil) // the first list, empty: logged too
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	d.Notify([]*protocol.URL{prov(1), prov(2)}) // no change: not logged
	d.Notify([]*protocol.URL{prov(2, "weight", "50"), prov(3)})
	var got []string
	for _, e := range logs.FilterMessage("provider list changed").All() {
		m := e.ContextMap()
		got = append(got, fmt.Sprintf("%s %v +%v -%v ~%v", m["service"], m["providers"], m["added"], m["removed"], m["changed"]))
	}
	want := []string{
		"demo.Greeter 0 +[] -[] ~[]",
		"demo.Greeter 2 +[127.0.0.1:1 127.0.0.1:2] -[] ~[]",
		"demo.Greeter 2 +[127.0.0.1:3] -[127.0.0.1:1] ~[127.0.0.1:2]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDirectoryEmptyProtection: an empty list keeps the providers of the
// last list whose connections are healthy, drops the others, ends with a
// non-empty list, and drops a kept provider once its connection fails; it
// can be turned off.
func TestDirectoryEmptyProtection(t *testing.T) {
	p := newFakeProtocol()
	d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: p,
		DrainTimeout: time.Second, Linger: 20 * time.Millisecond, ProtectCheck: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.Notify([]*protocol.URL{prov(1), prov(2)})
	p.invoker(2).available.Store(false) // its connection is down
	d.Notify(nil)
	if got := ports(d.Snapshot().Invokers()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("list = %v, want [1] kept by empty protection", got)
	}
	if got := d.Protected(); fmt.Sprint(got) != "[127.0.0.1:1]" {
		t.Fatalf("Protected() = %v", got)
	}
	if n := d.EmptyProtected(); n != 1 {
		t.Fatalf("EmptyProtected() = %d, want 1", n)
	}
	waitClosed(t, p.invoker(2))
	if n := p.invoker(1).closes.Load(); n != 0 {
		t.Fatalf("kept invoker closed %d times", n)
	}

	// A non-empty list ends protection.
	d.Notify([]*protocol.URL{prov(3)})
	if got := ports(d.Snapshot().Invokers()); fmt.Sprint(got) != "[3]" {
		t.Fatalf("list = %v, want [3]", got)
	}
	if got := d.Protected(); got != nil {
		t.Fatalf("Protected() = %v after a non-empty list", got)
	}
	waitClosed(t, p.invoker(1))

	// A kept provider whose connection fails is dropped; with none left
	// the directory is empty.
	d.Notify(nil)
	if got := ports(d.Snapshot().Invokers()); fmt.Sprint(got) != "[3]" {
		t.Fatalf("list = %v, want [3] kept", got)
	}
	p.invoker(3).available.Store(false)
	waitFor(t, "protected provider dropped", func() bool { return len(d.Snapshot().Invokers()) == 0 })
	waitClosed(t, p.invoker(3))
	if got := d.Protected(); got != nil {
		t.Fatalf("Protected() = %v with nothing kept", got)
	}
	if n := d.EmptyProtected(); n != 2 {
		t.Fatalf("EmptyProtected() = %d, want 2", n)
	}

	// Turned off, an empty list empties the directory at once.
	off, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: p, NoEmptyProtection: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { off.Close() })
	off.Notify([]*protocol.URL{prov(4)})
	off.Notify(nil)
	if l := off.Snapshot().Invokers(); len(l) != 0 {
		t.Fatalf("list = %v, want empty with protection off", ports(l))
	}
	if n := off.EmptyProtected(); n != 0 {
		t.Fatalf("EmptyProtected() = %d with protection off", n)
	}
}

// Once its application is shutting down, a directory's empty protection
// still keeps the healthy providers but says so at info, not as a warning:
// the providers leaving are mostly the application's own.
func TestDirectoryShuttingDownProtectsQuietly(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	d, err := registry.NewDirectory(registry.DirectoryOptions{Consumer: cons(), Protocol: newFakeProtocol(), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const msg = "the registry lists no provider; keeping the healthy connections of the last list (empty protection)"
	d.Notify([]*protocol.URL{prov(1)})
	d.Notify(nil)
	d.Notify([]*protocol.URL{prov(1)})
	d.ShuttingDown()
	d.Notify(nil)
	if got := ports(d.Snapshot().Invokers()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("list = %v, want [1] kept by empty protection", got)
	}
	var got []string
	for _, e := range logs.FilterMessage(msg).All() {
		got = append(got, fmt.Sprintf("%v %v", e.Level, e.ContextMap()["shutting_down"]))
	}
	if want := "[warn <nil> info true]"; fmt.Sprint(got) != want {
		t.Fatalf("logged %v, want %s", got, want)
	}
}
