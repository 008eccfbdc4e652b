package cluster_test

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/service"
)

// node is a real provider on loopback: its own dubbo protocol (so closing
// it stops its server), answering Name with its name, Fail with a business
// error, and Hold by waiting until released.
type node struct {
	name    string
	proto   *dubbo.Protocol
	url     *protocol.URL
	calls   atomic.Int64
	hold    chan struct{}
	holding chan struct{}
}

func (n *node) URL() *protocol.URL { return n.url }
func (n *node) ArgTypes(string) ([]reflect.Type, bool) {
	return []reflect.Type{reflect.TypeFor[string]()}, true
}
func (n *node) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	n.calls.Add(1)
	switch inv.Method {
	case "Fail":
		return nil, service.Errorf(service.CodeInvalidArgument, "no from %s", n.name)
	case "Hold":
		n.holding <- struct{}{}
		select {
		case <-n.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &protocol.Result{Value: n.name}, nil
}

func startNodes(t *testing.T, names ...string) []*node {
	t.Helper()
	var out []*node
	for _, name := range names {
		p, err := dubbo.New(nil)
		require.NoError(t, err)
		n := &node{name: name, proto: p, hold: make(chan struct{}), holding: make(chan struct{}, 16),
			url: protocol.NewURL(dubbo.Name, "127.0.0.1", 0, "demo.Named", nil)}
		exp, err := p.Export(n)
		require.NoError(t, err)
		n.url = exp.(*dubbo.Exporter).URL()
		t.Cleanup(func() { p.Close() })
		out = append(out, n)
	}
	return out
}

// refer returns a directory of consumer invokers, one per node.
func refer(t *testing.T, nodes []*node) *cluster.Static {
	t.Helper()
	p, err := dubbo.New(nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	var invs []protocol.Invoker
	for _, n := range nodes {
		inv, err := p.Refer(n.url)
		require.NoError(t, err)
		invs = append(invs, inv)
	}
	return cluster.NewStatic(invs...)
}

func loopCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func callName(ctx context.Context, c protocol.Invoker, method string) (string, error) {
	var reply string
	inv := &protocol.Invocation{Service: "demo.Named", Method: method, Args: []any{"x"}, Reply: &reply}
	_, err := c.Invoke(ctx, inv)
	return reply, err
}

func TestLoopbackFailoverAroundStoppedProvider(t *testing.T) {
	nodes := startNodes(t, "p1", "p2", "p3")
	c, err := cluster.New(refer(t, nodes), cluster.Options{LoadBalance: loadbalance.RoundRobin, Retries: cluster.DefaultRetries})
	require.NoError(t, err)
	defer c.Close()
	ctx := loopCtx(t)
	seen := map[string]int{}
	for range 9 {
		name, err := callName(ctx, c, "Name")
		require.NoError(t, err)
		seen[name]++
	}
	assert.Equal(t, map[string]int{"p1": 3, "p2": 3, "p3": 3}, seen)

	require.NoError(t, nodes[1].proto.Close()) // p2 goes away
	seen = map[string]int{}
	for range 20 {
		name, err := callName(ctx, c, "Name")
		require.NoError(t, err, "failover hides the stopped provider")
		seen[name]++
	}
	assert.Equal(t, 20, seen["p1"]+seen["p3"])
	assert.Equal(t, int64(3), nodes[1].calls.Load())
}

func TestLoopbackBusinessErrorNotRetried(t *testing.T) {
	nodes := startNodes(t, "p1", "p2", "p3")
	c, err := cluster.New(refer(t, nodes), cluster.Options{Retries: cluster.DefaultRetries})
	require.NoError(t, err)
	defer c.Close()
	_, err = callName(loopCtx(t), c, "Fail")
	var be *service.Error
	require.ErrorAs(t, err, &be)
	assert.True(t, be.Remote)
	assert.Equal(t, service.CodeInvalidArgument, be.Code)
	assert.Equal(t, int64(1), nodes[0].calls.Load()+nodes[1].calls.Load()+nodes[2].calls.Load())
}

func TestLoopbackBroadcastAndForking(t *testing.T) {
	nodes := startNodes(t, "p1", "p2", "p3")
	dir := refer(t, nodes)
	b, err := cluster.New(dir, cluster.Options{Strategy: cluster.Broadcast})
	require.NoError(t, err)
	defer b.Close()
	_, err = callName(loopCtx(t), b, "Name")
	require.NoError(t, err)
	for _, n := range nodes {
		assert.Equal(t, int64(1), n.calls.Load(), n.name)
	}

	// forking over a held provider and a free one: the free one answers
	// while the other is still held
	f, err := cluster.New(cluster.NewStatic(dir.Snapshot().Invokers()[:2]...), cluster.Options{Strategy: cluster.Forking})
	require.NoError(t, err)
	close(nodes[1].hold)
	reply, err := callName(loopCtx(t), f, "Hold")
	require.NoError(t, err)
	assert.Equal(t, "p2", reply)
	<-nodes[0].holding // p1 got its copy of the call too
	close(nodes[0].hold)
	require.NoError(t, f.Close())
	assert.Equal(t, int64(2), nodes[0].calls.Load())
	assert.Equal(t, int64(2), nodes[1].calls.Load())
}

func TestLoopbackLeastActiveAvoidsBusyProvider(t *testing.T) {
	nodes := startNodes(t, "p1", "p2")
	c, err := cluster.New(refer(t, nodes), cluster.Options{LoadBalance: loadbalance.LeastActive})
	require.NoError(t, err)
	defer c.Close()
	ctx := loopCtx(t)
	// one call held on whichever provider it lands
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := callName(ctx, c, "Hold")
		assert.NoError(t, err)
	})
	var held *node
	select {
	case <-nodes[0].holding:
		held = nodes[0]
	case <-nodes[1].holding:
		held = nodes[1]
	case <-ctx.Done():
		t.Fatal("no call held")
	}
	before := held.calls.Load()
	for range 10 {
		name, err := callName(ctx, c, "Name")
		require.NoError(t, err)
		assert.NotEqual(t, held.name, name, "the busy provider is avoided")
	}
	assert.Equal(t, before, held.calls.Load())
	close(held.hold)
	wg.Wait()
}

func TestLoopbackFailfastFailsafeFailback(t *testing.T) {
	nodes := startNodes(t, "p1", "p2")
	dir := refer(t, nodes)
	ctx := loopCtx(t)
	for _, s := range []string{cluster.Failfast, cluster.Failsafe, cluster.Failback} {
		c, err := cluster.New(dir, cluster.Options{Strategy: s})
		require.NoError(t, err)
		_, err = callName(ctx, c, "Fail")
		var be *service.Error
		require.ErrorAs(t, err, &be, "%s returns the business error", s)
		require.NoError(t, c.Close())
	}
	assert.Equal(t, int64(3), nodes[0].calls.Load()+nodes[1].calls.Load(), "one call each, never retried")

	// failback: p1 is gone before the first call; the background retry lands on p2
	require.NoError(t, nodes[0].proto.Close())
	c, err := cluster.New(dir, cluster.Options{Strategy: cluster.Failback, LoadBalance: loadbalance.RoundRobin,
		FailbackBackoff: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	before := nodes[1].calls.Load()
	reply, err := callName(ctx, c, "Name")
	require.NoError(t, err)
	if reply == "" { // the call hit p1 and was queued
		require.Eventually(t, func() bool { return nodes[1].calls.Load() == before+1 }, 10*time.Second, time.Millisecond)
	} else {
		assert.Equal(t, "p2", reply, "p1 was skipped as unavailable")
	}

	// failsafe: with every provider gone the caller gets the zero value
	require.NoError(t, nodes[1].proto.Close())
	fs, err := cluster.New(dir, cluster.Options{Strategy: cluster.Failsafe})
	require.NoError(t, err)
	defer fs.Close()
	reply, err = callName(ctx, fs, "Name")
	require.NoError(t, err)
	assert.Equal(t, "", reply)
}
