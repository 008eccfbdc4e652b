package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every real-ZooKeeper test.
const testTimeout = 90 * time.Second

// opts returns options with short timeouts for tests against a server with
// tickTime 500 ms, and a cache file in dir.
func opts(t *testing.T, dir string) zookeeper.Options {
	return zookeeper.Options{
		Application:     "test",
		SessionTimeout:  3 * time.Second,
		RetryMin:        50 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		WatchdogTimeout: 3 * time.Second,
		EmptyGrace:      2 * time.Second,
		RegisterWait:    time.Second,
		CacheFile:       filepath.Join(dir, "cache.json"),
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	}
}

// syncOpts is opts for tests that assert what Register or Unregister
// returned, or did, by the time it returned: they wait for the first
// attempt only RegisterWait long, and opts' 1 s is not always enough on
// a loaded machine (TestHealthy flaked that way).
func syncOpts(t *testing.T, dir string) zookeeper.Options {
	o := opts(t, dir)
	o.RegisterWait = 30 * time.Second
	return o
}

func newRegistry(t *testing.T, address string, o zookeeper.Options) *zookeeper.Registry {
	t.Helper()
	r, err := zookeeper.New(address, o)
	if err != nil {
		t.Fatalf("New(%q): %v", address, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func provider(iface string, port int, kv ...string) *protocol.URL {
	p := map[string]string{protocol.KeyInterface: iface, protocol.KeyTimestamp: "1700000000000"}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return protocol.NewURL("dubbo", "127.0.0.1", port, iface, p)
}

func consumer(iface string, kv ...string) *protocol.URL {
	p := map[string]string{protocol.KeyInterface: iface, protocol.KeySide: "consumer"}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return protocol.NewURL("consumer", "127.0.0.1", 0, iface, p)
}

// recorder is a Listener that keeps every list it gets.
type recorder struct {
	mu    sync.Mutex
	lists [][]*protocol.URL
	wake  chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) Notify(ps []*protocol.URL) {
	r.mu.Lock()
	r.lists = append(r.lists, slices.Clone(ps))
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// snapshot returns every list so far.
func (r *recorder) snapshot() [][]*protocol.URL {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists)
}

// addrs returns the sorted host:port set of the last list, and the number
// of lists so far (-1 addresses when none).
func (r *recorder) last() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lists) == 0 {
		return nil, 0
	}
	return addrsOf(r.lists[len(r.lists)-1]), len(r.lists)
}

func addrsOf(ps []*protocol.URL) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Address()
	}
	slices.Sort(out)
	return out
}

// waitAddrs waits until the last list holds exactly want (host:port).
func (r *recorder) waitAddrs(ctx context.Context, t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	for {
		got, n := r.last()
		if n > 0 && slices.Equal(got, want) {
			return
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			t.Fatalf("listener: last list %v after %d lists, want %v", got, n, want)
		}
	}
}

// emptyAfterNonEmpty counts lists that were empty after a non-empty one.
func (r *recorder) emptyAfterNonEmpty() int {
	n, seen := 0, false
	for _, l := range r.snapshot() {
		if len(l) > 0 {
			seen = true
		} else if seen {
			n++
		}
	}
	return n
}

// waitChildren waits until p has exactly n children, polling every 50 ms.
func waitChildren(ctx context.Context, t *testing.T, c *zk.Conn, p string, n int) []string {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var (
		kids []string
		err  error
	)
	for {
		kids, _, err = c.Children(p)
		if err == zk.ErrNoNode && n == 0 {
			return nil
		}
		if err == nil && len(kids) == n {
			return kids
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: %d children (%v), want %d", p, len(kids), err, n)
		}
	}
}

// waitFor polls cond every 20 ms until it holds.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func iface(t *testing.T) string {
	return "test." + strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// routerRecorder also records router lists.
type routerRecorder struct {
	*recorder
	routers chan []*protocol.URL
}

func (r *routerRecorder) NotifyRouters(rs []*protocol.URL) { r.routers <- rs }

// fakeProtocol refers invokers that answer nothing; for directory tests.
type fakeProtocol struct{}

func (fakeProtocol) Export(protocol.Invoker) (protocol.Exporter, error) { return nil, errors.New("no") }
func (fakeProtocol) Close() error                                       { return nil }
func (fakeProtocol) Refer(u *protocol.URL) (protocol.Invoker, error) {
	return protocol.InvokerFunc{U: u, F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{}, nil
	}}, nil
}

// observe adds an observer of info and above to o's logger and returns
// what it records, for tests of the log lines a user sees.
func observe(o *zookeeper.Options) *observer.ObservedLogs {
	core, logs := observer.New(zap.InfoLevel)
	o.Logger = zap.New(zapcore.NewTee(o.Logger.Core(), core))
	return logs
}
