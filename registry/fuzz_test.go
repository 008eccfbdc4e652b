package registry_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minidubbo/minidubbo/registry"
)

// FuzzOpenCache feeds arbitrary bytes as a cache file: loading must never
// panic, and whatever loads must survive a Store round trip.
func FuzzOpenCache(f *testing.F) {
	f.Add([]byte(`{"version":1,"services":{"demo.Greeter":["dubbo://127.0.0.1:1/demo.Greeter?interface=demo.Greeter"]}}`))
	f.Add([]byte(`{"version":1,"services":{"k":["%zz","x://"]}}`))
	f.Add([]byte(`{"version":1,"services":null}`))
	f.Add([]byte("\x00\xff"))
	// One directory per fuzzing process, and no fsync: each run rewrites
	// the file, and a directory and an fsync per input made the 30,000
	// runs of make fuzz slow enough to near its 5-minute bound.
	f.Cleanup(registry.SkipCacheSync())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "c.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := registry.OpenCache(path, nil)
		urls, _ := c.Load("demo.Greeter")
		if err := c.Store("demo.Greeter", urls); err != nil {
			t.Fatal(err)
		}
		again, ok := registry.OpenCache(path, nil).Load("demo.Greeter")
		if !ok || len(again) != len(urls) {
			t.Fatalf("round trip: %d urls then %d (%v)", len(urls), len(again), ok)
		}
	})
}
