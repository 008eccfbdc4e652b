package zookeeper_test

import (
	"testing"

	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

// FuzzParseAddress: any address either parses into host:port servers or
// fails with an error; it never panics.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"zookeeper://h1:2181,h2:2182", "zk://u:p@h?backup=a:1,b", "h", "://", "zookeeper://[::1]:2181", "@@:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := zookeeper.ParseAddress(s)
		if err != nil {
			return
		}
		if len(a.Servers) == 0 {
			t.Fatalf("%q parsed with no servers", s)
		}
	})
}
