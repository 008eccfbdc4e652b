package dubbo_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
)

// payload is the 581-byte argument of the benchmarks (issue 2, "Speed").
var payload = strings.Repeat("p", 581)

// echoInvoker answers Echo(string) with its argument.
type echoInvoker struct{ u *protocol.URL }

func (e echoInvoker) URL() *protocol.URL { return e.u }
func (e echoInvoker) ArgTypes(string) ([]reflect.Type, bool) {
	return []reflect.Type{stringT}, true
}
func (e echoInvoker) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	return &protocol.Result{Value: inv.Args[0]}, nil
}

// bytesEchoInvoker is echoInvoker for a []byte argument, as the bench/
// module's provider: Echo([]byte) ([]byte, error).
type bytesEchoInvoker struct{ echoInvoker }

func (bytesEchoInvoker) ArgTypes(string) ([]reflect.Type, bool) {
	return []reflect.Type{reflect.TypeFor[[]byte]()}, true
}

func benchDubbo(b *testing.B, u *protocol.URL, parallelism int) {
	cli := newProtocol(b, nil)
	inv := refer(b, cli, u)
	ctx := context.Background()
	call := func() {
		var reply string
		_, err := inv.Invoke(ctx, &protocol.Invocation{Service: "bench.Echo", Method: "Echo", Args: []any{payload}, Reply: &reply})
		if err != nil || len(reply) != len(payload) {
			b.Errorf("call: %v (reply %d bytes)", err, len(reply))
		}
	}
	call()
	run(b, parallelism, call)
}

// benchStub is benchDubbo through a consumer stub made by proxy.Refer, the
// way application code calls.
func benchStub(b *testing.B, u *protocol.URL, parallelism int) {
	cli := newProtocol(b, nil)
	var stub struct {
		Echo func(ctx context.Context, s string) (string, error)
	}
	require.NoError(b, proxy.Refer(&stub, refer(b, cli, u)))
	ctx := context.Background()
	call := func() {
		reply, err := stub.Echo(ctx, payload)
		if err != nil || len(reply) != len(payload) {
			b.Errorf("call: %v (reply %d bytes)", err, len(reply))
		}
	}
	call()
	run(b, parallelism, call)
}

func run(b *testing.B, parallelism int, call func()) {
	b.ReportAllocs()
	b.ResetTimer()
	if parallelism == 1 {
		for b.Loop() {
			call()
		}
		return
	}
	b.SetParallelism(max(parallelism/runtimeProcs(), 1))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call()
		}
	})
}

// Echo is the net/rpc service of the comparison.
type Echo struct{}

// Echo returns its argument.
func (Echo) Echo(arg string, reply *string) error {
	*reply = arg
	return nil
}

// serveNetRPC serves Echo with net/rpc on a free port until stop is closed.
func serveNetRPC() (addr string, stop func(), err error) {
	s := rpc.NewServer()
	if err := s.Register(Echo{}); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go s.ServeConn(c)
		}
	}()
	return l.Addr().String(), func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}, nil
}

func benchNetRPC(b *testing.B, addr string, parallelism int) {
	c, err := rpc.Dial("tcp", addr)
	require.NoError(b, err)
	b.Cleanup(func() { c.Close() })
	call := func() {
		var reply string
		if err := c.Call("Echo.Echo", payload, &reply); err != nil || len(reply) != len(payload) {
			b.Errorf("call: %v", err)
		}
	}
	call()
	run(b, parallelism, call)
}

const providerEnv = "MINIDUBBO_BENCH_PROVIDER"

// runBenchProvider is the child process of BenchmarkCall: it serves Echo
// with dubbo and with net/rpc, prints both addresses, and exits when its
// stdin closes.
func runBenchProvider() int {
	p, err := dubbo.New(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Close()
	exp, err := p.Export(echoInvoker{u: providerURL("bench.Echo")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	u := exp.(*dubbo.Exporter).URL()
	if _, err := p.Export(bytesEchoInvoker{echoInvoker{u: protocol.NewURL("dubbo", u.Host, u.Port, "bench.BytesEcho", nil)}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addr, stop, err := serveNetRPC()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	fmt.Printf("%d %s\n", exp.(*dubbo.Exporter).URL().Port, addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startBenchProvider runs the providers in a child process, so that the
// benchmark's B/op and allocs/op are the consumer's alone.
func startBenchProvider(b *testing.B) (dubboPort int, rpcAddr string) {
	dubboPort, rpcAddr, _ = startBenchProviderProc(b)
	return dubboPort, rpcAddr
}

// startBenchProviderProc is startBenchProvider that also returns the
// child's process id.
func startBenchProviderProc(b *testing.B) (dubboPort int, rpcAddr string, pid int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), providerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	_, err = fmt.Fscan(bufio.NewReader(stdout), &dubboPort, &rpcAddr)
	require.NoError(b, err)
	return dubboPort, rpcAddr, cmd.Process.Pid
}

// procCPUTime returns the CPU time, user and system, that process pid has
// used, from /proc (in clock ticks of 10 ms); 0 where there is no /proc.
func procCPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime the 12th, stime the 13th.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkCall is one loopback call with a 581-byte argument and reply, at
// 1 and 100 concurrent callers, through dubbo (the protocol invoker, and a
// consumer stub on it) and through net/rpc. The
// providers run in a child process: the figures are the consumer side's.
func BenchmarkCall(b *testing.B) {
	port, rpcAddr := startBenchProvider(b)
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "bench.Echo", nil)
	for _, n := range []int{1, 100} {
		b.Run("dubbo/callers="+itoa(n), func(b *testing.B) { benchDubbo(b, u, n) })
		b.Run("stub/callers="+itoa(n), func(b *testing.B) { benchStub(b, u, n) })
		b.Run("netrpc/callers="+itoa(n), func(b *testing.B) { benchNetRPC(b, rpcAddr, n) })
	}
}

// BenchmarkCallInProcess is BenchmarkCall with the providers in this
// process: the figures are both sides'.
func BenchmarkCallInProcess(b *testing.B) {
	srv := newProtocol(b, nil)
	exp, err := srv.Export(echoInvoker{u: providerURL("bench.Echo")})
	require.NoError(b, err)
	addr, stop, err := serveNetRPC()
	require.NoError(b, err)
	b.Cleanup(stop)
	for _, n := range []int{1, 100} {
		b.Run("dubbo/callers="+itoa(n), func(b *testing.B) { benchDubbo(b, exp.(*dubbo.Exporter).URL(), n) })
		b.Run("netrpc/callers="+itoa(n), func(b *testing.B) { benchNetRPC(b, addr, n) })
	}
}
