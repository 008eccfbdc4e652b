package proxy_test

import (
	"context"
	"net"
	"net/rpc"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/proxy"
)

// echoService is served both by minidubbo and by net/rpc in
// BenchmarkLoopback, so the two are compared on the same call.
type echoService struct{}

// Echo returns s.
func (echoService) Echo(_ context.Context, s string) (string, error) { return s, nil }

// RPCEcho is net/rpc's form of Echo.
type RPCEcho struct{}

// Echo returns s.
func (RPCEcho) Echo(s string, reply *string) error {
	*reply = s
	return nil
}

type echoClient struct {
	Echo func(context.Context, string) (string, error)
}

// BenchmarkLoopback is one call of a 581-byte string, echoed, over a
// loopback TCP connection, through a minidubbo stub and protocol/dubbo and
// through net/rpc (gob), at 1 and about 100 concurrent callers. allocs/op
// counts both sides, since both run in this process.
func BenchmarkLoopback(b *testing.B) {
	// A deadline far away, so a machine busy with other work does not turn
	// a slow call into a failure at the default 1 s timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.Run("minidubbo", func(b *testing.B) {
		var c echoClient
		if err := proxy.Refer(&c, loopback(b, echoService{}, nil)); err != nil {
			b.Fatal(err)
		}
		call := func() error {
			s, err := c.Echo(ctx, payload581)
			if err == nil && len(s) != len(payload581) {
				b.Errorf("reply of %d bytes", len(s))
			}
			return err
		}
		runCallers(b, call)
	})
	b.Run("netrpc", func(b *testing.B) {
		client := netRPC(b)
		call := func() error {
			var s string
			err := client.Call("RPCEcho.Echo", payload581, &s)
			if err == nil && len(s) != len(payload581) {
				b.Errorf("reply of %d bytes", len(s))
			}
			return err
		}
		runCallers(b, call)
	})
}

// runCallers runs call with 1 caller and with 100 callers in parallel.
func runCallers(b *testing.B, call func() error) {
	if err := call(); err != nil { // dial outside the timing
		b.Fatal(err)
	}
	b.Run("c1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c100", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 100/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// netRPC starts a net/rpc server on a loopback port and returns a client;
// both are closed, and their goroutines ended, when b ends.
func netRPC(b *testing.B) *rpc.Client {
	srv := rpc.NewServer()
	if err := srv.Register(RPCEcho{}); err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { srv.ServeConn(conn) })
		}
	})
	client, err := rpc.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = client.Close()
		_ = l.Close()
		wg.Wait()
	})
	return client
}
