// Package extend_test shows the doors of minidubbo from outside the
// framework: a registry of its own (a toy etcd-style key-value store), a
// serialization (encoding/gob), filters, a router, a load balancer and a
// fault-tolerance strategy of its own, each added in a few lines with a
// config option and chosen from YAML by name.
package extend_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// kvStore is a toy etcd: keys, values, and watches on key prefixes that get
// the whole matching set after every change.
type kvStore struct {
	mu      sync.Mutex
	data    map[string]string
	watches map[registry.Listener]string // listener -> prefix
}

func (s *kvStore) set(key, val string, del bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if del {
		delete(s.data, key)
	} else {
		s.data[key] = val
	}
	for l, prefix := range s.watches {
		if strings.HasPrefix(key, prefix) {
			l.Notify(s.list(prefix))
		}
	}
}

func (s *kvStore) list(prefix string) []*protocol.URL {
	var out []*protocol.URL
	for k, v := range s.data {
		if u, err := protocol.ParseURL(v); err == nil && strings.HasPrefix(k, prefix) {
			out = append(out, u)
		}
	}
	return out
}

// kvRegistry is a registry.Registry over the store, with etcd-style keys
// /services/{interface}/{category}/{url}.
type kvRegistry struct{ s *kvStore }

func key(u *protocol.URL) string {
	return "/services/" + u.Interface() + "/" + u.Param(protocol.KeyCategory, "providers") + "/" + u.String()
}
func (r kvRegistry) Register(_ context.Context, u *protocol.URL) error {
	r.s.set(key(u), u.String(), false)
	return nil
}
func (r kvRegistry) Unregister(_ context.Context, u *protocol.URL) error {
	r.s.set(key(u), "", true)
	return nil
}
func (r kvRegistry) Subscribe(u *protocol.URL, l registry.Listener) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	prefix := "/services/" + u.Interface() + "/providers/"
	r.s.watches[l] = prefix
	l.Notify(r.s.list(prefix))
	return nil
}
func (r kvRegistry) Unsubscribe(_ *protocol.URL, l registry.Listener) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	delete(r.s.watches, l)
	return nil
}
func (r kvRegistry) Close() error { return nil }

// gobValue carries one value as a gob interface value, with its type's
// name, so that a receiver without a declared type ($echo, generic calls)
// decodes it too. gob sends a concrete type under the name gob.Register
// gave it.
type gobValue struct{ V any }
type gobEncoder struct{ e *gob.Encoder }
type gobDecoder struct{ d *gob.Decoder }

func (g gobEncoder) Encode(v any) error { return g.e.Encode(gobValue{v}) }
func (g gobDecoder) Decode(p any) error {
	var v gobValue
	if err := g.d.Decode(&v); err != nil || v.V == nil {
		return err
	}
	dst, src := reflect.ValueOf(p).Elem(), reflect.ValueOf(v.V)
	if !src.Type().AssignableTo(dst.Type()) {
		return fmt.Errorf("gob: a %s does not go into a %s", src.Type(), dst.Type())
	}
	dst.Set(src)
	return nil
}

// gobs is a serialization of its own: encoding/gob, under the name "gob".
var gobs = serialize.Stream("gob", 20,
	func(w io.Writer) serialize.StreamEncoder { return gobEncoder{gob.NewEncoder(w)} },
	func(r io.Reader) serialize.StreamDecoder { return gobDecoder{gob.NewDecoder(r)} })

func init() {
	gob.Register(map[string]string{}) // attachments
	gob.Register(Person{})
}

// Person is a struct argument and reply.
type Person struct {
	Name string
	Age  int
}

type greeter struct{}

func (greeter) SayHello(_ context.Context, name string) (string, error) { return "hello " + name, nil }
func (greeter) Older(_ context.Context, p Person) (Person, error) {
	if p.Age < 0 {
		return Person{}, service.Errorf(service.CodeInvalidArgument, "%s is not born yet", p.Name)
	}
	return Person{Name: p.Name, Age: p.Age + 1}, nil
}

type greeterClient struct {
	service.Echo
	SayHello func(ctx context.Context, name string) (string, error)
	Older    func(ctx context.Context, p Person) (Person, error)
}

const appYAML = `
registries:
  kv: {address: "etcd://toy"}
protocols:
  dubbo: {host: 127.0.0.1, port: 0, serialization: gob}
services:
  greeter: {interface: demo.Greeter}
references:
  greeter: {interface: demo.Greeter, check: true}
`

func TestOwnRegistryAndSerializationFromYAML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	store := &kvStore{data: map[string]string{}, watches: map[registry.Listener]string{}}
	cfg, err := config.Parse(strings.NewReader(appYAML))
	require.NoError(t, err)
	app, err := config.New(cfg,
		config.WithRegistryFactory("etcd", func(string, registry.Options) (registry.Registry, error) {
			return kvRegistry{store}, nil
		}),
		config.WithSerializer(gobs),
	)
	require.NoError(t, err)
	defer app.Shutdown(context.Background())

	_, err = app.Export(ctx, "greeter", greeter{})
	require.NoError(t, err)
	var c greeterClient
	require.NoError(t, app.Refer(ctx, "greeter", &c))
	got, err := c.SayHello(ctx, "world")
	require.NoError(t, err)
	assert.Equal(t, "hello world", got)
	// A struct both ways, a business error, and $echo (no declared
	// type), all in gob over TCP.
	p, err := c.Older(ctx, Person{Name: "ann", Age: 41})
	require.NoError(t, err)
	assert.Equal(t, Person{Name: "ann", Age: 42}, p)
	_, err = c.Older(ctx, Person{Name: "bob", Age: -1})
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeInvalidArgument, se.Code)
	assert.Equal(t, "bob is not born yet", se.Message)
	echo, err := c.Echo.Echo(ctx, "ping")
	require.NoError(t, err)
	assert.Equal(t, "ping", echo)

	store.mu.Lock()
	providers := store.list("/services/demo.Greeter/providers/")
	store.mu.Unlock()
	require.Len(t, providers, 1, "the provider registered in the toy store")
	assert.Equal(t, "gob", providers[0].Param(protocol.KeySerialization, ""))
	assert.Equal(t, "127.0.0.1", providers[0].Host)
	assert.NotZero(t, providers[0].Port, "served on a real TCP port")

	// What travels is gob, not JSON renamed: a gob decoder reads it back.
	b, err := gobs.Marshal(Person{Name: "ann", Age: 7})
	require.NoError(t, err)
	assert.False(t, json.Valid(b))
	var back gobValue
	require.NoError(t, gob.NewDecoder(bytes.NewReader(b)).Decode(&back))
	assert.Equal(t, Person{Name: "ann", Age: 7}, back.V)

	// a scheme nobody registered is refused, listing the known ones
	_, err = config.New(cfg)
	require.ErrorContains(t, err, `unknown scheme "etcd" (known: memory, zk, zookeeper)`)
}

// counter is a filter of its own: it counts the calls through it, and
// fails the first fail of them as if the connection had been lost.
type counter struct{ n, fail atomic.Int64 }

func (c *counter) Invoke(ctx context.Context, inv *protocol.Invocation, next protocol.Invoker) (*protocol.Result, error) {
	if c.n.Add(1) <= c.fail.Load() {
		return nil, status.ErrConnLost
	}
	return next.Invoke(ctx, inv)
}

const filtersYAML = `
registries:
  mem: {address: "memory://local"}
services:
  greeter: {interface: demo.Greeter, filters: [audit]}
references:
  greeter: {interface: demo.Greeter, check: true, retries: 2, call_filters: [perCall], attempt_filters: [perAttempt]}
`

// A filter named in YAML runs where the key says: call filters once per
// call above the cluster, attempt filters once per attempt below it (so
// a retried call passes them again), provider filters on the service.
func TestOwnFilterFromYAML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var perCall, perAttempt, audit counter
	perAttempt.fail.Store(2) // the first two attempts "lose the connection"
	cfg, err := config.Parse(strings.NewReader(filtersYAML))
	require.NoError(t, err)
	app, err := config.New(cfg,
		config.WithFilter("perCall", &perCall),
		config.WithFilter("perAttempt", &perAttempt),
		config.WithFilter("audit", &audit),
	)
	require.NoError(t, err)
	defer app.Shutdown(context.Background())
	_, err = app.Export(ctx, "greeter", greeter{})
	require.NoError(t, err)
	var c greeterClient
	require.NoError(t, app.Refer(ctx, "greeter", &c))
	got, err := c.SayHello(ctx, "world")
	require.NoError(t, err)
	assert.Equal(t, "hello world", got)
	assert.Equal(t, []int64{1, 3, 1}, []int64{perCall.n.Load(), perAttempt.n.Load(), audit.n.Load()},
		"per call, per attempt (two failed, retried), on the provider")

	_, err = config.New(cfg, config.WithFilter("perCall", &perCall))
	require.ErrorContains(t, err, `unknown filter "perAttempt" (known: perCall)`)
}

// heavy is a router of its own: it keeps the providers of weight 200 or
// more, for every call (one subset, so Narrow runs once per provider list).
type heavy struct{ narrowed, seen atomic.Int64 }

func (*heavy) Key(*protocol.Invocation) cluster.RouteKey { return cluster.RouteKey{} }
func (h *heavy) Narrow(invokers []protocol.Invoker, _ cluster.RouteKey) ([]protocol.Invoker, error) {
	h.narrowed.Add(1)
	h.seen.Store(int64(len(invokers)))
	var out []protocol.Invoker
	for _, inv := range invokers {
		if inv.URL().Weight() >= 200 {
			out = append(out, inv)
		}
	}
	return out, nil
}

type named string

func (n named) SayHello(_ context.Context, name string) (string, error) {
	return string(n) + " says hello " + name, nil
}

const routerYAML = `
registries:
  mem: {address: "memory://routed"}
services:
  greeter: {interface: demo.Greeter, weight: %d}
references:
  greeter: {interface: demo.Greeter, check: true, routers: [heavyOnly]}
`

// A router named in YAML narrows every call of the reference: of two
// providers over TCP, only the heavy one is called.
func TestOwnRouterFromYAML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reg := memory.New()
	defer reg.Close()
	var h heavy
	for _, weight := range []int{100, 200} {
		cfg, err := config.Parse(strings.NewReader(fmt.Sprintf(routerYAML, weight)))
		require.NoError(t, err)
		app, err := config.New(cfg, config.WithRegistry("mem", reg),
			config.WithRouter("heavyOnly", func(*protocol.URL) (cluster.Router, error) { return &h, nil }))
		require.NoError(t, err)
		defer app.Shutdown(context.Background())
		_, err = app.Export(ctx, "greeter", named(fmt.Sprint(weight)))
		require.NoError(t, err)
		if weight == 100 {
			continue
		}
		var c struct {
			SayHello func(ctx context.Context, name string) (string, error)
		}
		require.NoError(t, app.Refer(ctx, "greeter", &c))
		require.Eventually(t, func() bool {
			_, err := c.SayHello(ctx, "x")
			return err == nil && h.seen.Load() == 2
		}, 5*time.Second, 5*time.Millisecond, "the router sees both providers")
		narrowed := h.narrowed.Load()
		for range 20 {
			got, err := c.SayHello(ctx, "x")
			require.NoError(t, err)
			require.Equal(t, "200 says hello x", got)
		}
		assert.Equal(t, narrowed, h.narrowed.Load(), "narrowed once per provider list, not per call")

		_, err = config.New(cfg)
		require.ErrorContains(t, err, `references.greeter.routers[0]: "heavyOnly" is no condition rule (when => then) and no router`)
	}
}

// heaviest is a load balancer of its own: its picker, built once per
// provider list, takes the provider of the greatest weight still allowed.
type heaviest struct{ built *atomic.Int64 } // providers in the last list built

type heaviestPicker []int // provider indexes, heaviest first

func (h heaviest) Build(invokers []protocol.Invoker) loadbalance.Picker {
	h.built.Store(int64(len(invokers)))
	p := make(heaviestPicker, len(invokers))
	for i := range p {
		p[i] = i
	}
	slices.SortStableFunc(p, func(a, b int) int { return invokers[b].URL().Weight() - invokers[a].URL().Weight() })
	return p
}

func (p heaviestPicker) Pick(_ *protocol.Invocation, ex loadbalance.Exclude) (int, error) {
	for _, i := range p {
		if ex == nil || !ex.Excluded(i) {
			return i, nil
		}
	}
	return 0, loadbalance.ErrNoInvokers
}

// once is a fault-tolerance strategy of its own: one attempt, counted.
type once struct{ calls *atomic.Int64 }

func (o once) Invoke(ctx context.Context, c *cluster.Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	o.calls.Add(1)
	p, err := c.Pick(inv, cluster.Tried{})
	if err != nil {
		return nil, err
	}
	return c.Call(ctx, p, inv)
}

const balancerYAML = `
registries:
  mem: {address: "memory://balanced"}
services:
  greeter: {interface: demo.Greeter, weight: %d}
references:
  greeter: {interface: demo.Greeter, check: true, loadbalance: heaviest, cluster: once}
`

// A load balancer and a strategy named in YAML: of two providers over
// TCP, every call goes to the heavier one, through the strategy.
func TestOwnBalancerAndStrategyFromYAML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reg := memory.New()
	defer reg.Close()
	var calls, built atomic.Int64
	for _, weight := range []int{200, 100} {
		cfg, err := config.Parse(strings.NewReader(fmt.Sprintf(balancerYAML, weight)))
		require.NoError(t, err)
		app, err := config.New(cfg, config.WithRegistry("mem", reg),
			config.WithLoadBalance("heaviest", func(loadbalance.Options) loadbalance.LoadBalance { return heaviest{&built} }),
			config.WithCluster("once", func(cluster.Options) (cluster.Strategy, error) { return once{&calls}, nil }))
		require.NoError(t, err)
		defer app.Shutdown(context.Background())
		_, err = app.Export(ctx, "greeter", named(fmt.Sprint(weight)))
		require.NoError(t, err)
		if weight == 200 {
			continue
		}
		var c struct {
			SayHello func(ctx context.Context, name string) (string, error)
		}
		require.NoError(t, app.Refer(ctx, "greeter", &c))
		for range 20 {
			got, err := c.SayHello(ctx, "x")
			require.NoError(t, err)
			require.Equal(t, "200 says hello x", got)
		}
		assert.Equal(t, int64(20), calls.Load())
		assert.Equal(t, int64(2), built.Load(), "the picker was built over both providers")

		_, err = config.New(cfg, config.WithRegistry("mem", reg))
		require.ErrorContains(t, err, `references.greeter.loadbalance: unknown "heaviest"`)
	}
}
