package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
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
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list each build's packages: %v", err)
	}
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
	for _, name := range append(slices.Clone(order), "minidubbo-borrow") {
		linked := deps("benchone,bench_" + strings.ReplaceAll(name, "-", "_"))
		fw, _, _ := strings.Cut(name, "-") // minidubbo-borrow is minidubbo's
		want := map[string]bool{}
		if _, ok := frameworkModules[fw]; ok {
			want[fw] = true
		}
		if len(linked) != len(want) || (len(want) == 1 && !linked[fw]) {
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
	// Free memory returned to the OS shows as released, and the
	// scavenger's CPU time never goes back.
	keep = nil
	debug.FreeOSMemory()
	c, err := fetchStats(ln.Addr().String())
	if err != nil || c.Released == 0 || c.ScavengeSeconds < b.ScavengeSeconds {
		t.Errorf("after FreeOSMemory: %+v (before %+v), %v", c, b, err)
	}
	if s, ok := perCall(b, c, 1000); !ok || s.ScavengeCPU < 0 {
		t.Errorf("scavenger per call: %+v %v", s, ok)
	}
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

// TestRawIOCarriesEverything: raw TCP's socket I/O moves 8 MiB each way
// over a loopback connection (more than the socket buffers hold, so both
// sides wait on the poller), in writes and reads of many sizes, and then
// reads io.EOF once the peer closes.
func TestRawIOCarriesEverything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- nc
	}()
	a, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	sa, sb := rawIO(a), rawIO(b)
	if runtime.GOOS == "linux" {
		if _, ok := sa.(*sockIO); !ok {
			t.Fatalf("rawIO of a TCP connection is %T, want *sockIO", sa)
		}
	}
	const total = 8 << 20
	data := make([]byte, total)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	echo := func(w io.Writer, done chan<- error) {
		var err error
		for off, step := 0, 1; off < total && err == nil; step = step*3%65521 + 1 {
			n := min(step, total-off)
			_, err = w.Write(data[off : off+n])
			off += n
		}
		done <- err
	}
	wa, wb := make(chan error, 1), make(chan error, 1)
	go echo(sa, wa) // a → b and b → a at once: neither side may wait for the other
	go echo(sb, wb)
	read := func(r io.Reader) ([]byte, error) {
		got := make([]byte, 0, total)
		buf := make([]byte, 70000)
		for k := 1; len(got) < total; k = k*5%69997 + 1 {
			n, err := r.Read(buf[:min(k, total-len(got))])
			got = append(got, buf[:n]...)
			if err != nil {
				return got, err
			}
		}
		return got, nil
	}
	gotB, errB := read(sb)
	gotA, errA := read(sa)
	if errA != nil || errB != nil || <-wa != nil || <-wb != nil {
		t.Fatalf("read errors %v, %v", errA, errB)
	}
	if !bytes.Equal(gotA, data) || !bytes.Equal(gotB, data) {
		t.Fatal("bytes differ from those written")
	}
	a.Close()
	if n, err := sb.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("after the peer closed: %d, %v; want 0, io.EOF", n, err)
	}
	b.Close()
	if _, err := sb.Write([]byte("x")); err == nil {
		t.Error("a write on a closed connection succeeded")
	}
}
