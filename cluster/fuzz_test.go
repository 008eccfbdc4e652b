package cluster

import (
	"slices"
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
)

// FuzzConditionRule checks that no rule text makes parsing or routing
// panic, and that routing only ever returns listed providers.
func FuzzConditionRule(f *testing.F) {
	for _, s := range []string{"method = find* => host = 127.0.0.2", "=> host != 1.2.3.4,5.6.7.8", "host = 10.* =>",
		"a=1&b!=2=>c=3", "", "=>", "true => false", "m = ** => port = 2*"} {
		f.Add(s, "findUser")
	}
	invs := tagged("", "gray", "")
	f.Fuzz(func(t *testing.T, rule, method string) {
		r, err := NewConditionRouter(rule, ConditionOptions{})
		if err != nil {
			return
		}
		out, err := Route(r, invs, &protocol.Invocation{Service: "demo.Greeter", Method: method})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range out {
			found := false
			for _, q := range invs {
				if p == q {
					found = true
				}
			}
			if !found {
				t.Fatalf("rule %q returned a provider that was not listed", rule)
			}
		}
	})
}

// FuzzRegistryNodes feeds the registry's node names a consumer routes by
// (anyone with write access to the registry may create them): a provider
// node (its dubbo.tag) and a routers node (a condition:// URL with an
// escaped rule, force, priority and enabled). Parsing is an error or a
// router, never a panic, and the tag router and the condition router only
// ever return listed providers.
func FuzzRegistryNodes(f *testing.F) {
	for _, s := range [][2]string{
		{"dubbo%3A%2F%2F127.0.0.9%3A20880%2Fdemo.Greeter%3Fdubbo.tag%3Dgray",
			"condition%3A%2F%2F0.0.0.0%2Fdemo.Greeter%3Fcategory%3Drouters%26rule%3Dmethod%2B%253D%2Bfind*%2B%253D%253E%2Bhost%2B%253D%2B127.0.0.2%26force%3Dtrue%26priority%3D1"},
		{"dubbo://127.0.0.9:1/demo.Greeter?dubbo.tag=", "condition://0.0.0.0/demo.Greeter?rule=%3D%3E+host+!%3D+127.0.0.1&enabled=false"},
		{"dubbo://h:1/x", "empty://0.0.0.0/demo.Greeter?category=routers"},
		{"dubbo://h:1/x", "condition://0.0.0.0/demo.Greeter?rule=a%25zz&priority=-9223372036854775808&force=maybe"},
		{"dubbo://h:1/x", "tag://0.0.0.0/demo.Greeter?rule=x"},
	} {
		f.Add(s[0], s[1], "findUser", "gray")
	}
	consumer := protocol.NewURL("consumer", "127.0.0.5", 0, "demo.Greeter", map[string]string{"application": "shop"})
	f.Fuzz(func(t *testing.T, providerNode, routerNode, method, tag string) {
		invs := tagged("", "gray", "")
		if u, err := protocol.ParseURL(providerNode); err == nil {
			invs = append(invs, &fakeInvoker{u: u, name: "N"})
		}
		routers := []Router{NewTagRouter()}
		if u, err := protocol.ParseURL(routerNode); err == nil {
			rs, err := RoutersFromURLs([]*protocol.URL{u}, consumer)
			if err == nil {
				routers = append(routers, rs...)
			}
		}
		inv := &protocol.Invocation{Service: "demo.Greeter", Method: method, Attachments: map[string]string{protocol.KeyTag: tag}}
		out := invs
		for _, r := range routers {
			next, err := Route(r, out, inv)
			if err != nil {
				return // a rule may route to nobody: an error, not a panic
			}
			for _, p := range next {
				if !slices.Contains(out, p) {
					t.Fatalf("router %T (node %q) returned a provider it was not given", r, routerNode)
				}
			}
			out = next
		}
	})
}
