package cluster

import (
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
