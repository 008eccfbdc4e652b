package registry_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		consumer, provider []string
		want               bool
	}{
		{nil, nil, true},
		{[]string{"version", "1.0"}, nil, false},
		{[]string{"version", "1.0"}, []string{"version", "1.0"}, true},
		{[]string{"version", "*"}, []string{"version", "3"}, true},
		{[]string{"group", "a"}, []string{"group", "b"}, false},
		{[]string{"group", "a, b"}, []string{"group", "b"}, true},
		{[]string{"group", "*"}, []string{"group", "x"}, true},
		{nil, []string{"enabled", "false"}, false},
	} {
		if got := registry.Match(cons(tc.consumer...), prov(1, tc.provider...)); got != tc.want {
			t.Errorf("Match(%v, %v) = %v, want %v", tc.consumer, tc.provider, got, tc.want)
		}
	}
	other := protocol.NewURL("dubbo", "h", 1, "other.Service", nil)
	if registry.Match(cons(), other) {
		t.Error("matched another interface")
	}
	empty := protocol.NewURL("empty", "h", 1, "demo.Greeter", nil)
	if registry.Match(cons(), empty) {
		t.Error("matched empty://")
	}
	if got := registry.Filter(cons(), []*protocol.URL{prov(1), prov(1), nil, prov(2)}); len(got) != 2 {
		t.Errorf("Filter kept %d, want 2 (dedup, nil dropped)", len(got))
	}
}

func TestCacheRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "cache.json")
	c := registry.OpenCache(path, nil)
	if _, ok := c.Load("demo.Greeter"); ok {
		t.Fatal("empty cache has an entry")
	}
	if err := c.Store("demo.Greeter", []*protocol.URL{prov(2), prov(1)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Store("other:1.0", nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%d files in the cache dir, want 1 (no temp files left)", len(entries))
	}
	c2 := registry.OpenCache(path, nil)
	urls, ok := c2.Load("demo.Greeter")
	if !ok || len(urls) != 2 || urls[0].Port != 1 || urls[1].Port != 2 {
		t.Fatalf("reloaded: %v %v", urls, ok)
	}
	if urls, ok := c2.Load("other:1.0"); !ok || len(urls) != 0 {
		t.Fatalf("reloaded empty entry: %v %v", urls, ok)
	}
	// Another process's cache over the same file keeps entries it does
	// not know.
	c3 := registry.OpenCache(path, nil)
	c4 := registry.OpenCache(path, nil)
	_ = c3.Store("only.c3", []*protocol.URL{prov(7)})
	_ = c4.Store("demo.Greeter", []*protocol.URL{prov(3)})
	c5 := registry.OpenCache(path, nil)
	if urls, ok := c5.Load("only.c3"); !ok || len(urls) != 1 {
		t.Fatalf("entry of the other writer lost: %v %v", urls, ok)
	}
	if urls, _ := c5.Load("demo.Greeter"); len(urls) != 1 || urls[0].Port != 3 {
		t.Fatalf("last writer did not win: %v", urls)
	}
	// Memory-only cache.
	m := registry.OpenCache("", nil)
	_ = m.Store("x", []*protocol.URL{prov(1)})
	if urls, ok := m.Load("x"); !ok || len(urls) != 1 {
		t.Fatal("memory cache lost its entry")
	}
}

func TestCacheCorruptIgnored(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"truncated": `{"version":1,"services":{"demo.Greeter":["dubbo://127.0.0.1:1/demo.Gre`,
		"garbage":   "\x00\x01 not json",
		"version":   `{"version":99,"services":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			c := registry.OpenCache(path, zap.New(core))
			if logs.Len() != 1 {
				t.Fatalf("%d warnings, want 1", logs.Len())
			}
			if _, ok := c.Load("demo.Greeter"); ok {
				t.Fatal("corrupt cache served an entry")
			}
			// The next Store replaces the file with a valid one.
			if err := c.Store("demo.Greeter", []*protocol.URL{prov(1)}); err != nil {
				t.Fatal(err)
			}
			if urls, ok := registry.OpenCache(path, nil).Load("demo.Greeter"); !ok || len(urls) != 1 {
				t.Fatal("cache not rewritten")
			}
		})
	}
	// A bad URL inside a valid file is skipped; the rest is served.
	path := filepath.Join(dir, "badurl.json")
	_ = os.WriteFile(path, []byte(`{"version":1,"services":{"k":["nonsense","dubbo://127.0.0.1:5/demo.Greeter"]}}`), 0o600)
	core, logs := observer.New(zap.WarnLevel)
	urls, ok := registry.OpenCache(path, zap.New(core)).Load("k")
	if !ok || len(urls) != 1 || logs.Len() != 1 {
		t.Fatalf("bad url entry: %v %v, %d warnings", urls, ok, logs.Len())
	}
}

func TestDefaultCachePath(t *testing.T) {
	p := registry.DefaultCachePath("my app", "zookeeper://h1:2181,h2:2181")
	base := filepath.Base(p)
	if base != "registry-my_app-h1_2181_h2_2181.json" || !strings.Contains(p, "minidubbo") {
		t.Fatalf("DefaultCachePath = %s", p)
	}
}

type recorder struct{ ch chan []*protocol.URL }

func (r *recorder) Notify(ps []*protocol.URL) { r.ch <- ps }

func TestMemoryRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reg := memory.New()
	_ = reg.Register(ctx, prov(1))
	rec := &recorder{ch: make(chan []*protocol.URL, 16)}
	if err := reg.Subscribe(cons(), rec); err != nil {
		t.Fatal(err)
	}
	next := func() []int {
		select {
		case l := <-rec.ch:
			out := make([]int, len(l))
			for i, u := range l {
				out[i] = u.Port
			}
			return out
		case <-ctx.Done():
			t.Fatal("no notification")
			return nil
		}
	}
	want := func(w string) {
		t.Helper()
		if got := fmt.Sprint(next()); got != w {
			t.Fatalf("got %s, want %s", got, w)
		}
	}
	want("[1]")
	_ = reg.Register(ctx, prov(2))
	_ = reg.Register(ctx, prov(3, "version", "9")) // another version: list unchanged
	_ = reg.Register(ctx, cons())                  // a consumer: no notification
	_ = reg.Unregister(ctx, prov(1))
	want("[1 2]")
	want("[1 2]")
	want("[2]")
	select {
	case l := <-rec.ch:
		t.Fatalf("extra notification %v", l)
	default:
	}
	if err := reg.Unsubscribe(cons(), rec); err != nil {
		t.Fatal(err)
	}
	_ = reg.Register(ctx, prov(4))
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-rec.ch:
		t.Fatalf("notification after Unsubscribe: %v", l)
	default:
	}
	if err := reg.Register(ctx, prov(5)); err != memory.ErrClosed {
		t.Fatalf("Register after Close = %v", err)
	}
	if err := reg.Register(ctx, protocol.NewURL("dubbo", "h", 1, "", nil)); err == nil {
		t.Fatal("URL without interface accepted")
	}
}
