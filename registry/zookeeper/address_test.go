package zookeeper_test

import (
	"strings"
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in, servers, user, pass, err string
	}{
		{in: "zookeeper://127.0.0.1:2181", servers: "127.0.0.1:2181"},
		{in: "zookeeper://h1:2181,h2:2182,h3:2183", servers: "h1:2181,h2:2182,h3:2183"},
		{in: "h1,h2:3000", servers: "h1:2181,h2:3000"},
		{in: "zk://u:p@h1:1?backup=h2:2,h3:3&session=4000", servers: "h1:1,h2:2,h3:3", user: "u", pass: "p"},
		{in: "zookeeper://h1:2181/?root=x", servers: "h1:2181"},
		{in: "etcd://h1:2379", err: "unknown scheme"},
		{in: "zookeeper://", err: `address "zookeeper://" names no server; write HOST:PORT, such as zookeeper://127.0.0.1:2181`},
		{in: "", err: `address "" names no server; write HOST:PORT, such as zookeeper://127.0.0.1:2181`},
		{in: "zookeeper://h1:99999", err: `server "h1:99999": port 99999 is out of range (1-65535; ZooKeeper's is usually 2181)`},
		{in: "zookeeper://h1:2181,h2:0", err: `server "h2:0": port 0 is out of range (1-65535`},
		{in: "zookeeper://h1:21a1", err: `server "h1:21a1": port "21a1" is not a number; write HOST:PORT, such as zookeeper://127.0.0.1:2181`},
		{in: "zookeeper://h1:", err: `server "h1:": no port after the colon (leave out the colon for the default port 2181)`},
		{in: "zookeeper://:2181", err: `server ":2181": no host before the port; write HOST:PORT`},
		{in: "zookeeper://u@h1:1", err: "user:password"},
	} {
		a, err := zookeeper.ParseAddress(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAddress(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tc.in, err)
			continue
		}
		if got := strings.Join(a.Servers, ","); got != tc.servers || a.Username != tc.user || a.Password != tc.pass {
			t.Errorf("ParseAddress(%q) = %s %s:%s, want %s %s:%s", tc.in, got, a.Username, a.Password, tc.servers, tc.user, tc.pass)
		}
	}
}

func TestOpenParams(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		err    string
	}{
		{map[string]string{"max_childs": "3"}, `unknown setting "max_childs" (known: max_children, max_buffer_size, private_read, root)`},
		{map[string]string{"max_children": "x"}, `max_children="x": want a whole number`},
		{map[string]string{"max_buffer_size": "100"}, "MaxBufferSize 100 is below 65536"},
		{map[string]string{"private_read": "yes please"}, "private_read"},
	} {
		r, err := zookeeper.Open("zookeeper://h:1", registry.Options{CacheFile: "-", Params: tc.params})
		if err == nil {
			r.Close()
			t.Errorf("Open with %v succeeded, want %q", tc.params, tc.err)
		} else if !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Open with %v = %v, want %q", tc.params, err, tc.err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		addr string
		o    zookeeper.Options
		err  string
	}{
		{"zookeeper://h:1", zookeeper.Options{Username: "u"}, "together"},
		{"zookeeper://h:1", zookeeper.Options{Root: "a/b"}, "one path element"},
		{"zookeeper://h:1?session=abc", zookeeper.Options{}, "session"},
		{"zookeeper://h:1?max_children=many", zookeeper.Options{}, `max_children="many": want a whole number`},
		{"zookeeper://h:1?max_buffer_size=-5", zookeeper.Options{}, "MaxBufferSize -5 is negative"},
		{"zookeeper://h:1?max_buffer_size=1000", zookeeper.Options{}, "MaxBufferSize 1000 is below 65536"},
		{"zookeeper://h:1?private_read=maybe", zookeeper.Options{}, `private_read="maybe": want true or false`},
	} {
		r, err := zookeeper.New(tc.addr, tc.o)
		if err == nil {
			r.Close()
			t.Errorf("New(%q, %+v) succeeded, want %q", tc.addr, tc.o, tc.err)
		} else if !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%q) = %v, want %q", tc.addr, err, tc.err)
		}
	}
}

// Open takes the root from Params as from the address; giving both, they
// must agree.
func TestOpenRoot(t *testing.T) {
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "demo.Greeter", nil)
	for _, tc := range []struct {
		addr, root, path, err string
	}{
		{"zookeeper://h:1", "shop", "/shop/demo.Greeter/providers/", ""},
		{"zookeeper://h:1?root=shop", "", "/shop/demo.Greeter/providers/", ""},
		{"zookeeper://h:1?root=/shop/", "shop", "/shop/demo.Greeter/providers/", ""},
		{"zookeeper://h:1", "", "/dubbo/demo.Greeter/providers/", ""},
		{"zookeeper://h:1?root=dubbo", "shop", "", `root "shop" disagrees with the address's root=dubbo`},
		{"zookeeper://h:1?group=blue", "shop", "", `root "shop" disagrees with the address's group=blue`},
	} {
		params := map[string]string{}
		if tc.root != "" {
			params["root"] = tc.root
		}
		r, err := zookeeper.Open(tc.addr, registry.Options{CacheFile: "-", Params: params})
		if tc.err != "" {
			if err == nil {
				r.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q, root %q) = %v, want %q", tc.addr, tc.root, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q, root %q): %v", tc.addr, tc.root, err)
			continue
		}
		if got := r.(*zookeeper.Registry).NodePath(u); !strings.HasPrefix(got, tc.path) {
			t.Errorf("Open(%q, root %q): node %s, want it under %s", tc.addr, tc.root, got, tc.path)
		}
		r.Close()
	}
}
