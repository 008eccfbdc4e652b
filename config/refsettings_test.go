package config_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/service"
)

// who answers with its provider's name and counts its calls.
type who struct {
	name  string
	calls atomic.Int64
}

func (w *who) Who(_ context.Context, a, b string) (string, error) {
	w.calls.Add(1)
	return w.name, nil
}

// Att returns the attachment key as the provider method sees it.
func (w *who) Att(ctx context.Context, key string) (string, error) {
	v, _ := service.Attachment(ctx, key)
	return v, nil
}

type whoClient struct {
	Who func(ctx context.Context, a, b string) (string, error)
	Att func(ctx context.Context, key string) (string, error)
}

// whoProviders starts n provider applications of test.Who on reg.
func whoProviders(t *testing.T, reg *memory.Registry, n int) []*who {
	t.Helper()
	var out []*who
	for i := range n {
		c := &config.Config{
			Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
			Services:   map[string]config.ServiceConfig{"who": {Interface: "test.Who"}},
		}
		app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
		w := &who{name: "p" + strconv.Itoa(i)}
		_, err = app.Export(testCtx(t), "who", w)
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

func whoConsumer(t *testing.T, reg *memory.Registry, yaml string) whoClient {
	cl, _ := whoApp(t, reg, yaml)
	return cl
}

func whoApp(t *testing.T, reg *memory.Registry, yaml string) (whoClient, *config.Application) {
	t.Helper()
	c, err := config.Parse(strings.NewReader(yaml))
	require.NoError(t, err)
	app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	var cl whoClient
	require.NoError(t, app.Refer(testCtx(t), "who", &cl))
	return cl, app
}

// The consistent-hash key, set from YAML, decides the provider.
func TestReferenceHashFromYAML(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	whoProviders(t, reg, 3)
	byArg1 := whoConsumer(t, reg, `
registries: {mem: {address: "memory://test"}}
references:
  who: {interface: test.Who, check: true, loadbalance: consistenthash, hash: {arguments: [1], nodes: 320}}
`)
	byArg0 := whoConsumer(t, reg, `
registries: {mem: {address: "memory://test"}}
references:
  who: {interface: test.Who, check: true, loadbalance: consistenthash}
`)
	one, many := map[string]bool{}, map[string]bool{}
	for i := range 60 {
		name, err := byArg1.Who(ctx, "user-"+strconv.Itoa(i), "same")
		require.NoError(t, err)
		one[name] = true
		name, err = byArg0.Who(ctx, "user-"+strconv.Itoa(i), "same")
		require.NoError(t, err)
		many[name] = true
	}
	assert.Len(t, one, 1, "keyed on the second argument, which never changes")
	assert.Len(t, many, 3, "keyed on the first argument, which always changes")
}

// forks from YAML: a forking reference calls that many providers at once.
func TestReferenceForksFromYAML(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	whoProviders(t, reg, 3)
	cl, app := whoApp(t, reg, `
registries: {mem: {address: "memory://test"}}
references:
  who: {interface: test.Who, check: true, cluster: forking, forks: 3, failback: {retries: 1, queue: 5, backoff: 1s}}
`)
	for range 4 {
		_, err := cl.Who(ctx, "a", "b")
		require.NoError(t, err)
	}
	// every call was tried on all three (the losers are cancelled once
	// the first answers, so count attempts on the consumer's side)
	require.Eventually(t, func() bool {
		per := map[string]int64{}
		for _, s := range app.Monitor().Snapshot() {
			if s.Provider != "" {
				per[s.Provider] += s.Calls
			}
		}
		return len(per) == 3 && per[sortedFirst(per)] == 4 && sum(per) == 12
	}, 10*time.Second, 5*time.Millisecond)
}

func TestReferenceSettingsValidated(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{forks: -1}`, "references.who.forks -1: must not be negative"},
		{`{failback: {queue: -1}}`, "references.who.failback.queue -1: must not be negative"},
		{`{failback: {retries: -1}}`, "references.who.failback.retries -1: must not be negative"},
		{`{failback: {backoff: -1s}}`, "references.who.failback.backoff -1s: must not be negative"},
		{`{failback: {timeout: -1s}}`, "references.who.failback.timeout -1s: must not be negative"},
		{`{hash: {nodes: -5}}`, "references.who.hash.nodes -5: must not be negative"},
		{`{hash: {arguments: [0, -1]}}`, "references.who.hash.arguments: index -1 must not be negative"},
	} {
		_, err := config.Parse(strings.NewReader("registries: {mem: {address: \"memory://x\"}}\nreferences:\n  who: " + tc.yaml + "\n"))
		assert.ErrorContains(t, err, tc.want, tc.yaml)
	}
}

// Registries of one application with the same memory:// name are one;
// other names are separate registries.
func TestMemoryRegistryNames(t *testing.T) {
	ctx := testCtx(t)
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{
			"a": {Address: "memory://x"}, "b": {Address: "memory://x"}, "c": {Address: "memory://y"},
		},
		Services: map[string]config.ServiceConfig{"who": {Interface: "test.Who", Registries: []string{"a"}}},
		References: map[string]config.ReferenceConfig{
			"sameName":  {Interface: "test.Who", Registries: []string{"b"}, Check: true},
			"otherName": {Interface: "test.Who", Registries: []string{"c"}, Check: true},
		},
	}
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	_, err = app.Export(ctx, "who", &who{name: "p"})
	require.NoError(t, err)
	var cl whoClient
	require.NoError(t, app.Refer(ctx, "sameName", &cl))
	name, err := cl.Who(ctx, "a", "b")
	require.NoError(t, err)
	assert.Equal(t, "p", name)
	err = app.Refer(ctx, "otherName", &cl)
	require.ErrorIs(t, err, cluster.ErrNoProvider)
}

func sortedFirst(m map[string]int64) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Per-method retries are the consumer's setting: they do not travel to the
// provider, and a user attachment named "retries" does not change them.
func TestRetriesStayLocal(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	whoProviders(t, reg, 1)
	cl := whoConsumer(t, reg, `
registries: {mem: {address: "memory://test"}}
references:
  who: {interface: test.Who, check: true, retries: 0, methods: {Att: {retries: 3}}}
`)
	got, err := cl.Att(ctx, "retries")
	require.NoError(t, err)
	assert.Empty(t, got, "the retries setting reached the provider")
	got, err = cl.Att(service.WithAttachment(ctx, "retries", "mine"), "retries")
	require.NoError(t, err)
	assert.Equal(t, "mine", got, "a user attachment is the user's")
}

// relay calls who with its own context, passing incoming attachments on
// only when asked to.
type relay struct {
	next      *whoClient
	propagate bool
}

func (r *relay) Att(ctx context.Context, key string) (string, error) {
	if r.propagate {
		ctx = service.Propagate(ctx, key)
	}
	return r.next.Att(ctx, key)
}

// Framework attachments (the token) never reach the service method, and a
// provider's incoming attachments are not forwarded into its own calls
// unless it propagates them.
func TestAttachmentsStayWithTheCall(t *testing.T) {
	ctx := testCtx(t)
	c := &config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://x"}},
		Services: map[string]config.ServiceConfig{
			"who":   {Interface: "test.Who", Token: "true"},
			"relay": {Interface: "test.Relay", Token: "true"},
		},
		// The relay's call to who must fit in the time left of the call
		// to the relay: two calls within the default 1 s failed now and
		// then on a machine busy with other tests.
		References: map[string]config.ReferenceConfig{
			"who":   {Interface: "test.Who", Check: true, Timeout: 30 * time.Second},
			"relay": {Interface: "test.Relay", Check: true, Timeout: 30 * time.Second},
		},
	}
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	var toWho whoClient
	var toRelay struct {
		Att func(ctx context.Context, key string) (string, error)
	}
	rl := &relay{next: &toWho}
	_, err = app.Export(ctx, "who", &who{name: "w"})
	require.NoError(t, err)
	_, err = app.Export(ctx, "relay", rl)
	require.NoError(t, err)
	require.NoError(t, app.Refer(ctx, "who", &toWho))
	require.NoError(t, app.Refer(ctx, "relay", &toRelay))

	got, err := toWho.Att(ctx, "token")
	require.NoError(t, err)
	assert.Empty(t, got, "the token reached the service method")
	actx := service.WithAttachment(ctx, "trace", "t-1")
	got, err = toRelay.Att(actx, "trace")
	require.NoError(t, err)
	assert.Empty(t, got, "the relay forwarded its incoming attachment without being asked")
	rl.propagate = true
	got, err = toRelay.Att(actx, "trace")
	require.NoError(t, err)
	assert.Equal(t, "t-1", got, "propagated on request")
	got, err = toRelay.Att(actx, "token")
	require.NoError(t, err)
	assert.Empty(t, got, "a propagated token")
}
