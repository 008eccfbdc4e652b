package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// frameworkModules are the module paths that mark a framework as linked.
var frameworkModules = map[string]string{
	"grpc":      "google.golang.org/grpc",
	"kitex":     "github.com/cloudwego/kitex",
	"rpcx":      "github.com/smallnest/rpcx",
	"minidubbo": "github.com/minidubbo/minidubbo/protocol",
	"netrpc":    "net/rpc",
}

// TestOwnBinaryLinksOneSystem: built with the tags benchone,bench_NAME the
// command links NAME's framework and no other one, and registers NAME
// alone; built without tags it links every framework.
func TestOwnBinaryLinksOneSystem(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the packages of seven builds")
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	deps := func(tags string) map[string]bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := []string{"list", "-mod=mod", "-deps"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.CommandContext(ctx, goCmd, append(args, ".")...).Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		linked := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			for fw, mod := range frameworkModules {
				if p == mod || strings.HasPrefix(p, mod+"/") {
					linked[fw] = true
				}
			}
		}
		return linked
	}
	if all := deps(""); len(all) != len(frameworkModules) {
		t.Fatalf("the default build links %v, want every framework of %v", all, frameworkModules)
	}
	for _, name := range order {
		linked := deps("benchone,bench_" + name)
		want := map[string]bool{}
		if _, ok := frameworkModules[name]; ok {
			want[name] = true
		}
		if len(linked) != len(want) || (len(want) == 1 && !linked[name]) {
			t.Errorf("bench-%s links %v, want %v", name, linked, want)
		}
	}
}

func TestBinaryFor(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "bench")
	if err := os.WriteFile(filepath.Join(dir, "bench-grpc"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-rpcx"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bench-kitex"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"grpc":      filepath.Join(dir, "bench-grpc"),
		"rpcx":      self, // not executable
		"kitex":     self, // a directory
		"minidubbo": self, // missing
	} {
		if got := binaryFor(self, dir, name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

// TestServerStats: a load client reads the server's Go runtime figures
// from its stats listener; they grow with the server's allocations and
// collections, and perCall divides them by the calls.
func TestServerStats(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveStats(ln)
	a, err := fetchStats(ln.Addr().String())
	if err != nil || !a.Initialized {
		t.Fatalf("%+v %v", a, err)
	}
	var keep [][]byte
	for range 1000 {
		keep = append(keep, make([]byte, 1024))
	}
	runtime.GC()
	runtime.GC()
	b, err := fetchStats(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if b.GCs < a.GCs+2 || b.AllocBytes < a.AllocBytes+1000*1024 || b.AllocObjs < a.AllocObjs+1000 {
		t.Fatalf("after 1,000 allocations of 1 KiB and two collections: %+v, then %+v", a, b)
	}
	s, ok := perCall(a, b, 1000)
	if !ok || s.AllocBytes < 1024 || s.AllocObjs < 1 || s.GCsPer10k < 20 {
		t.Errorf("per call: %+v %v", s, ok)
	}
	runtime.KeepAlive(keep)
	if _, ok := perCall(goStats{}, b, 1000); ok {
		t.Error("a missing reading gave figures")
	}
	if s, err := fetchStats("-"); err != nil || s.Initialized {
		t.Errorf("no stats address: %+v %v", s, err)
	}
	if _, err := fetchStats(ln.Addr().String() + "0"); err == nil {
		t.Error("a wrong address gave no error")
	}
}
