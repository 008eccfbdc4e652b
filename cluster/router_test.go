package cluster

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

func names(l []protocol.Invoker) string {
	var b strings.Builder
	for _, p := range l {
		b.WriteString(p.(*fakeInvoker).name)
	}
	return b.String()
}

func tagged(tags ...string) []protocol.Invoker {
	out := make([]protocol.Invoker, len(tags))
	for i, tg := range tags {
		p := map[string]string{}
		if tg != "" {
			p[protocol.KeyTag] = tg
		}
		out[i] = &fakeInvoker{u: protocol.NewURL("dubbo", fmt.Sprintf("127.0.0.%d", i+1), 20880+i, "demo.Greeter", p), name: string(rune('A' + i))}
	}
	return out
}

func TestTagRouter(t *testing.T) {
	invs := tagged("gray", "", "gray", "blue", "")
	r := NewTagRouter()
	for _, tc := range []struct {
		tag   string
		force bool
		want  string
	}{
		{"", false, "BE"},
		{"gray", false, "AC"},
		{"blue", true, "D"},
		{"red", false, "BE"},
		{"red", true, ""},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.tag, tc.force), func(t *testing.T) {
			inv := invocation("m")
			inv.Attachments = map[string]string{}
			if tc.tag != "" {
				inv.Attachments[protocol.KeyTag] = tc.tag
			}
			if tc.force {
				inv.Attachments[KeyForceTag] = "true"
			}
			got, err := Route(r, invs, inv)
			require.NoError(t, err)
			assert.Equal(t, tc.want, names(got))
		})
	}
	// nothing tagged: the list itself comes back (the balancer's picker is shared)
	plain := tagged("", "", "")
	got, _ := Route(r, plain, invocation("m"))
	assert.Same(t, &plain[0], &got[0])
	// every provider tagged and the call untagged: all of them
	all := tagged("x", "y")
	got, _ = Route(r, all, invocation("m"))
	assert.Equal(t, "AB", names(got))
}

func TestTagRouterInCluster(t *testing.T) {
	invs := tagged("gray", "")
	c := newCluster(t, NewStatic(invs...), Options{Routers: []Router{NewTagRouter()}})
	inv := invocation("m")
	inv.Attachments = map[string]string{protocol.KeyTag: "gray"}
	for range 5 {
		_, err := c.Invoke(testCtx(t), inv)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(5), invs[0].(*fakeInvoker).calls.Load())
	inv.Attachments[protocol.KeyTag] = "red"
	inv.Attachments[KeyForceTag] = "true"
	_, err := c.Invoke(testCtx(t), inv)
	require.ErrorIs(t, err, ErrNoProvider)
	assert.ErrorContains(t, err, "routers left none of 2 providers")
}

// Calls that alternate between route keys each get their own subset:
// the route remembers the last child it found, and a call with another
// key does not take it.
func TestAlternatingRoutes(t *testing.T) {
	invs := tagged("gray", "", "blue")
	c := newCluster(t, NewStatic(invs...), Options{Routers: []Router{NewTagRouter()}})
	gray := invocation("m")
	gray.Attachments = map[string]string{protocol.KeyTag: "gray"}
	blue := invocation("m")
	blue.Attachments = map[string]string{protocol.KeyTag: "blue"}
	plain := invocation("m")
	forced := invocation("m")
	forced.Attachments = map[string]string{protocol.KeyTag: "red", KeyForceTag: "true"}
	for round := range 4 {
		for _, call := range []struct {
			inv  *protocol.Invocation
			want string
		}{{gray, "A"}, {gray, "A"}, {plain, "B"}, {blue, "C"}, {plain, "B"}, {forced, ""}, {gray, "A"}} {
			var reply string
			call.inv.Reply = &reply
			_, err := c.Invoke(testCtx(t), call.inv)
			if call.want == "" {
				require.ErrorIs(t, err, ErrNoProvider, "round %d", round)
				continue
			}
			require.NoError(t, err, "round %d", round)
			require.Equal(t, call.want, reply, "round %d, tag %q", round, call.inv.Attachments[protocol.KeyTag])
		}
	}
	assert.Equal(t, []int64{12, 8, 4}, []int64{invs[0].(*fakeInvoker).calls.Load(),
		invs[1].(*fakeInvoker).calls.Load(), invs[2].(*fakeInvoker).calls.Load()})
}

func TestConditionRouter(t *testing.T) {
	invs := tagged("", "", "", "gray") // hosts 127.0.0.1..4, ports 20880..20883
	consumer := protocol.NewURL("consumer", "10.1.1.1", 0, "demo.Greeter", map[string]string{"application": "shop"})
	for _, tc := range []struct {
		rule   string
		method string
		force  bool
		want   string
	}{
		{"method = find* => host = 127.0.0.2", "findUser", false, "B"},
		{"method = find* => host = 127.0.0.2", "saveUser", false, "ABCD"},
		{"method = find*,list* => host = 127.0.0.2,127.0.0.3", "listUsers", false, "BC"},
		{"method != find* => host != 127.0.0.1", "saveUser", false, "BCD"},
		{"=> port = 20882", "m", false, "C"},
		{"host = 127.0.0.3", "m", false, "C"},
		{"host = 10.1.1.* => host = 127.0.0.4", "m", false, "D"},
		{"host = 10.9.9.9 => host = 127.0.0.4", "m", false, "ABCD"},
		{"application = shop => dubbo.tag = gray", "m", false, "D"},
		{"application = shop & method = m => host = 127.0.0.1 & port = 20880", "m", false, "A"},
		{"application = shop & method = x => host = 127.0.0.1", "m", false, "ABCD"},
		{"=> host = 192.168.0.1", "m", false, "ABCD"},
		{"=> host = 192.168.0.1", "m", true, ""},
		{"application = shop =>", "m", false, ""},
		{"true => host = *.0.0.1", "m", false, "A"},
		{"=> address = 127.0.0.2:20881", "m", false, "B"},
	} {
		t.Run(tc.rule+"/"+tc.method, func(t *testing.T) {
			r, err := NewConditionRouter(tc.rule, ConditionOptions{Force: tc.force, Consumer: consumer})
			require.NoError(t, err)
			got, err := Route(r, invs, invocation(tc.method))
			require.NoError(t, err)
			assert.Equal(t, tc.want, names(got))
		})
	}
}

func TestConditionRuleErrors(t *testing.T) {
	for _, rule := range []string{"", "method => host = 1", "method = => host = 1", "=> host", "a = 1 & & b = 2 => c = 3", "m = 1 => = 2"} {
		_, err := NewConditionRouter(rule, ConditionOptions{})
		assert.Error(t, err, rule)
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "anything", true}, {"find*", "findUser", true}, {"find*", "fin", false},
		{"*User", "findUser", true}, {"f*d*r", "findUser", true}, {"f*x*r", "findUser", false},
		{"abc", "abc", true}, {"abc", "abcd", false}, {"a*a", "a", false},
	} {
		assert.Equal(t, tc.want, glob(tc.p, tc.s), "%s ~ %s", tc.p, tc.s)
	}
}

func TestParseRouterURL(t *testing.T) {
	rule := "method = find* => host = 127.0.0.2"
	raw := "condition://0.0.0.0/demo.Greeter?category=routers&force=true&priority=2&rule=" + url.QueryEscape(rule)
	// as a registry node name: the whole URL escaped once more
	u, err := protocol.ParseURL(url.QueryEscape(raw))
	require.NoError(t, err)
	r, err := ParseRouterURL(u, nil)
	require.NoError(t, err)
	assert.Equal(t, rule, r.Rule())
	assert.Equal(t, 2, r.Priority())
	invs := tagged("", "", "")
	got, _ := Route(r, invs, invocation("findX"))
	assert.Equal(t, "B", names(got))

	disabled, err := protocol.ParseURL(raw + "&enabled=false")
	require.NoError(t, err)
	r, err = ParseRouterURL(disabled, nil)
	require.NoError(t, err)
	got, _ = Route(r, invs, invocation("findX"))
	assert.Equal(t, "ABC", names(got))

	empty, _ := protocol.ParseURL("empty://0.0.0.0/demo.Greeter?category=routers")
	r, err = ParseRouterURL(empty, nil)
	require.NoError(t, err)
	assert.Nil(t, r)

	script, _ := protocol.ParseURL("script://0.0.0.0/demo.Greeter?rule=x")
	_, err = ParseRouterURL(script, nil)
	assert.ErrorContains(t, err, `scheme "script" not supported (known: condition, empty)`)
	bad, _ := protocol.ParseURL("condition://0.0.0.0/demo.Greeter?rule=x&force=maybe")
	_, err = ParseRouterURL(bad, nil)
	assert.ErrorContains(t, err, `force="maybe" is not a boolean`)

	second, _ := protocol.ParseURL("condition://0.0.0.0/demo.Greeter?priority=1&rule=" + url.QueryEscape("=> host = 127.0.0.3"))
	rs, err := RoutersFromURLs([]*protocol.URL{u, empty, second}, nil)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, 1, rs[0].(*ConditionRouter).Priority())
}

func TestSetRouters(t *testing.T) {
	invs := tagged("", "", "")
	c := newCluster(t, NewStatic(invs...), Options{LoadBalance: "roundrobin"})
	r, err := NewConditionRouter("=> host = 127.0.0.3", ConditionOptions{})
	require.NoError(t, err)
	c.SetRouters([]Router{r})
	for range 4 {
		_, err := c.Invoke(testCtx(t), invocation("m"))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(4), invs[2].(*fakeInvoker).calls.Load())
	c.SetRouters(nil)
	for range 3 {
		_, err := c.Invoke(testCtx(t), invocation("m"))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), invs[0].(*fakeInvoker).calls.Load())
}
