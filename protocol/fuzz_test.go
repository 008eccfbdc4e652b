package protocol_test

import (
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
)

// FuzzParseURL feeds registry node names (provider URLs anyone with write
// access to the registry may create) to the parser: it returns a URL or an
// error, never panics, and what it parses reads back its timeouts without
// overflow.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"dubbo%3A%2F%2F127.0.0.1%3A20880%2Fdemo.Greeter%3Ftimeout%3D1000%26SayHello.timeout%3D250",
		"dubbo://127.0.0.1:20880/demo.Greeter?timeout=9223372036854775807&x.timeout=-1",
		"dubbo://[::1]:1/p?a=%zz", "://", "dubbo://h:99999/p", "dubbo://h:1/p?timeout=abc&weight=-5",
		"dubbo://h:1/p?weight=9223372036854775807&warmup=9223372036854775807",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := protocol.ParseURL(s)
		if err != nil {
			return
		}
		if u.Port < 0 || u.Port > 65535 {
			t.Fatalf("%q: port %d", s, u.Port)
		}
		if d, _ := u.TimeoutOf("SayHello"); d <= 0 {
			t.Fatalf("%q: timeout %v", s, d)
		}
		if w := u.Weight(); w < 0 || w > protocol.MaxWeight {
			t.Fatalf("%q: weight %d", s, w)
		}
		if d := u.Warmup(); d < 0 {
			t.Fatalf("%q: warm-up %v", s, d)
		}
		_ = u.String()
	})
}
