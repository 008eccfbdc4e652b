package config_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// silentProvider accepts dubbo connections on 127.0.0.1, reads their
// frames and never answers: it tells arrived of each two-way request, so
// that a test knows its callers are all waiting for an answer, and holds
// no goroutine per call (the stacks a collection scans are the
// consumer's).
type silentProvider struct {
	ln      net.Listener
	arrived chan struct{}
	wg      sync.WaitGroup
}

func newSilentProvider(t *testing.T) *silentProvider {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProvider{ln: ln, arrived: make(chan struct{}, 1024)}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.read(c) })
		}
	})
	return p
}

func (p *silentProvider) read(c net.Conn) {
	defer c.Close()
	var hb [exchange.HeaderSize]byte
	for {
		if _, err := io.ReadFull(c, hb[:]); err != nil {
			return
		}
		h, err := exchange.ParseHeader(hb[:])
		if err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(h.Length)); err != nil {
			return
		}
		if h.Request && h.TwoWay && !h.Event {
			p.arrived <- struct{}{}
		}
	}
}

// close stops accepting; the connections end when the consumer closes
// them.
func (p *silentProvider) close() {
	p.ln.Close()
	p.wg.Wait()
}

// waitingStacks returns, for each goroutine waiting in exchange's
// Client.CallAt under a stub, its frames from CallAt up to the stub,
// innermost first. A frame is a physical one, as a collection walks it
// (calls inlined into it are not counted), except that tracebacks leave
// out the compiler's wrappers (a value method called through an
// interface runs one, for one frame more).
func waitingStacks() [][]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out [][]string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		var st []string
		var inl []string
		// After the header, each frame is two lines: the call, and its
		// file:line, which ends in an offset (+0x...) for a physical frame
		// only.
		for i := 1; i+1 < len(lines); i += 2 {
			fn := lines[i]
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			if !strings.Contains(lines[i+1], " +0x") {
				inl = append(inl, fn)
				continue
			}
			fn = strings.Join(append(inl, fn), " < inlined in ")
			inl = inl[:0]
			if len(st) == 0 && !strings.Contains(fn, "exchange.(*Client).CallAt") {
				continue
			}
			st = append(st, fn)
			if strings.Contains(fn, "minidubbo/proxy.") {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

// scannedStackBytes returns the bytes of goroutine stacks the last
// collection scanned.
func scannedStackBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// inlining reports whether this binary was built with inlining (not
// -gcflags=-l): frame counts mean something only then.
func inlining() bool {
	buf := make([]byte, 4096)
	lines := strings.Split(string(buf[:probe(buf)]), "\n")
	// probe's frame has no offset when it was inlined here.
	for i, l := range lines[:len(lines)-1] {
		if strings.Contains(l, ".probe(") {
			return !strings.Contains(lines[i+1], " +0x")
		}
	}
	return false
}

func probe(buf []byte) int { return runtime.Stack(buf, false) }

// TestWaitingCallStack pins how deep a consumer call waits for its
// answer: the frames between the stub and the exchange's CallAt, through
// everything config puts above the protocol as the bench's consumer has
// it (call counting, cluster with failover and random over a registry
// directory, attempt counting, the dubbo invoker). Every collection walks
// each of those frames of every waiting call.
func TestWaitingCallStack(t *testing.T) {
	ctx := testCtx(t)
	p := newSilentProvider(t)
	defer p.close()
	port := p.ln.Addr().(*net.TCPAddr).Port
	reg := memory.New()
	defer reg.Close()
	u := protocol.NewURL("dubbo", "127.0.0.1", port, "held.Echo", map[string]string{protocol.KeyInterface: "held.Echo"})
	if err := reg.Register(ctx, u); err != nil {
		t.Fatal(err)
	}
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "held-consumer"},
		Registries:  map[string]config.RegistryConfig{"mem": {Address: "memory://held"}},
		References:  map[string]config.ReferenceConfig{"echo": {Interface: "held.Echo", Check: true, Timeout: e2eTimeout}},
	}, config.WithRegistry("mem", reg), config.WithProtocolOptions(dubbo.Options{Connections: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Shutdown(context.Background())
	var stub struct {
		Echo func(ctx context.Context, b []byte) ([]byte, error)
	}
	if err := app.Refer(ctx, "echo", &stub); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	before := scannedStackBytes()
	const callers = 8
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := stub.Echo(cctx, []byte("x"))
			errs <- err
		})
	}
	for range callers {
		select {
		case <-p.arrived:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	// Every request reached the provider, so every caller is inside
	// CallAt until it is cancelled.
	stacks := waitingStacks()
	runtime.GC()
	after := scannedStackBytes()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call ended with %v, want it cancelled", err)
		}
	}
	if len(stacks) != callers {
		t.Fatalf("found %d callers waiting in CallAt under a stub, want %d", len(stacks), callers)
	}
	st := stacks[0]
	t.Logf("a waiting call, %d frames from CallAt to the stub:\n\t%s", len(st), strings.Join(st, "\n\t"))
	t.Logf("stack bytes a collection scanned: %d with %d calls waiting, %d before: %s per waiting call",
		after, callers, before, strconv.FormatInt((int64(after)-int64(before))/callers, 10))
	if !inlining() {
		t.Skip("built without inlining: frame counts differ")
	}
	const maxFrames = 7
	if len(st) > maxFrames {
		t.Errorf("a waiting call is %d frames deep from CallAt to the stub, want at most %d", len(st), maxFrames)
	}
}
