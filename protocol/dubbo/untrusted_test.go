package dubbo_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// wide is a 64-byte struct: msgpack/v5 sizes a []wide from its declared
// length, 64 bytes per one-byte element.
type wide struct{ A, B, C, D, E, F, G, H int64 }

// batcher is a provider whose only method takes []wide and counts calls.
type batcher struct {
	u     *protocol.URL
	calls atomic.Int64
}

func (b *batcher) URL() *protocol.URL { return b.u }
func (b *batcher) ArgTypes(m string) ([]reflect.Type, bool) {
	if m == "Batch" {
		return []reflect.Type{reflect.TypeFor[[]wide]()}, true
	}
	return nil, false
}
func (b *batcher) Invoke(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	b.calls.Add(1)
	return &protocol.Result{Value: len(inv.Args[0].([]wide))}, nil
}

// head encodes the head of a request body: service, version, group,
// method, timeout, then the given raw attachments and raw rest.
func head(t testing.TB, svc, method string, timeout int64, atts, rest []byte) []byte {
	var b bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&b)
	for _, s := range []string{svc, "", "", method} {
		require.NoError(t, enc.EncodeString(s))
	}
	require.NoError(t, enc.EncodeInt(timeout))
	enc.Release()
	b.Write(atts)
	b.Write(rest)
	return b.Bytes()
}

func msgpackMap(t testing.TB, m map[string]string) []byte {
	var b bytes.Buffer
	enc := serialize.NewMsgpack().NewEncoder(&b)
	require.NoError(t, enc.EncodeMap(m))
	enc.Release()
	return b.Bytes()
}

// sliceBomb is an argument count of 1 and an array32 of n empty maps.
func sliceBomb(n int) []byte {
	b := []byte{0x01, 0xdd, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[2:], uint32(n))
	return append(b, bytes.Repeat([]byte{0x80}, n)...)
}

// attachmentBomb is a map32 declaring n entries followed by n pairs of
// empty strings: about 2n bytes.
func attachmentBomb(n int) []byte {
	b := []byte{0xdf, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return append(b, bytes.Repeat([]byte{0xa0, 0xa0}, n)...)
}

// allocatedDuring returns the bytes the process allocated while f ran.
func allocatedDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// memProviderEnv makes the test binary run runMemProvider instead of the
// tests.
const memProviderEnv = "MINIDUBBO_MEMTEST_PROVIDER"

// memFrameTimeout is the provider's FrameTimeout in the memory test: far
// above what an 8 MiB frame takes on a loaded machine, so the test measures
// memory, not the slow-loris bound (transport tests that one).
const memFrameTimeout = 2 * time.Minute

// runMemProvider is the child process of TestRequestMemoryBound: a batcher
// exported alone in its process. It prints its port, then answers each
// line on stdin: "mem" with the process's TotalAlloc after a GC and its
// count of GC cycles, "stats" with the protocol's BadAttachments and
// BadBodies and the method's calls. It exits when stdin closes.
func runMemProvider() int {
	p, err := dubbo.New(&dubbo.Options{FrameTimeout: memFrameTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Close()
	b := &batcher{u: providerURL("demo.Batch")}
	exp, err := p.Export(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The same method exported with json: a request names its
	// serialization, and the arguments are decoded with it.
	port := exp.(*dubbo.Exporter).URL().Port
	bj := &batcher{u: protocol.NewURL("dubbo", "127.0.0.1", port, "demo.BatchJSON",
		map[string]string{protocol.KeySerialization: serialize.JSON})}
	if _, err := p.Export(bj); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(port)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "mem":
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			fmt.Println(m.TotalAlloc, m.NumGC)
		case "stats":
			st := p.Stats()
			fmt.Println(st.BadAttachments, st.BadBodies, b.calls.Load()+bj.calls.Load())
		default:
			fmt.Println("unknown command", in.Text())
		}
	}
	return 0
}

// memProvider is the parent's end of runMemProvider.
type memProvider struct {
	port int
	in   io.Writer
	out  *bufio.Reader
}

// startMemProvider starts runMemProvider in a child process, stopped at
// the end of the test.
func startMemProvider(t *testing.T) *memProvider {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memProviderEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	m := &memProvider{in: stdin, out: bufio.NewReader(stdout)}
	_, err = fmt.Fscanln(m.out, &m.port)
	require.NoError(t, err, "the provider process's port")
	return m
}

// ask sends cmd to the provider process and scans its one-line answer
// into vals.
func (m *memProvider) ask(t *testing.T, cmd string, vals ...any) {
	_, err := fmt.Fprintln(m.in, cmd)
	require.NoError(t, err)
	_, err = fmt.Fscanln(m.out, vals...)
	require.NoError(t, err, "the provider process's answer to %q", cmd)
}

// TestRequestMemoryBound sends hostile request bodies over TCP and checks
// that each costs the provider at most 4×B + 64 KiB before any method runs.
// The provider runs alone in a child process, and what is measured is
// that process's runtime.MemStats.TotalAlloc from before the request is
// sent to after its answer arrived: no other test's goroutines, and not
// the client's buffers, count.
func TestRequestMemoryBound(t *testing.T) {
	prov := startMemProvider(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(prov.port))

	cases := []struct {
		name string
		body []byte
		ser  byte // msgpack if 0
		want string
	}{
		// 8 MiB of attachments declaring 4 Mi entries (just under the payload limit): a map sized from the
		// count cost 320 MiB.
		{"attachment count bomb", head(t, "demo.Batch", "Batch", 1000, attachmentBomb(4<<20-100), nil), 0, "map of 4194204 entries, limit 64"},
		// 1 MiB of one-byte elements into []wide: msgpack/v5 allocated 64 MiB.
		{"typed slice bomb", head(t, "demo.Batch", "Batch", 1000, msgpackMap(t, nil), sliceBomb(1<<20)), 0, "would allocate more than"},
		// 900 KB of "{}," into []wide in json: encoding/json allocated 104 MB.
		{"json typed slice bomb", jsonSliceBomb(300_000), serialize.JSONID, "would allocate more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := rawFrame(c.body, uint32(len(c.body)))
			if c.ser != 0 {
				frame = serializedFrame(c.body, c.ser)
			}
			var before, after, gcBefore, gcAfter uint64
			prov.ask(t, "mem", &before, &gcBefore)
			start := time.Now()
			code, msg, err := rawCallWithin(t, addr, frame, memFrameTimeout)
			took := time.Since(start)
			prov.ask(t, "mem", &after, &gcAfter)
			require.NoError(t, err, "the provider closed the connection %v after the %d-byte request was sent, without an answer", took, len(c.body))
			require.Equal(t, status.BadRequest, code, msg)
			require.Contains(t, msg, c.want)
			got, limit := after-before, uint64(4*len(c.body)+64<<10)
			require.Less(t, got, limit,
				"the provider process allocated %d bytes (TotalAlloc %d -> %d, %d GC cycles, %v) for a %d-byte request body: %.2f× the body; the bound is 4×B + 64 KiB = %d",
				got, before, after, gcAfter-gcBefore, took, len(c.body), float64(got)/float64(len(c.body)), limit)
			t.Logf("%d-byte body: the provider allocated %d bytes (%.2f× the body) in %v", len(c.body), got, float64(got)/float64(len(c.body)), took)
		})
	}
	var badAttachments, badBodies, calls uint64
	prov.ask(t, "stats", &badAttachments, &badBodies, &calls)
	require.Zero(t, calls, "no method ran")
	require.Equal(t, uint64(1), badAttachments)
	require.Equal(t, uint64(2), badBodies)
}

// jsonSliceBomb is a json request body for demo.BatchJSON.Batch whose one
// argument is an array of n empty objects, decoded into []wide.
func jsonSliceBomb(n int) []byte {
	b := []byte("\"demo.BatchJSON\"\n\"\"\n\"\"\n\"Batch\"\n1000\nnull\n1\n[")
	b = append(b, bytes.Repeat([]byte("{},"), n-1)...)
	return append(b, "{}]\n"...)
}

// serializedFrame is rawFrame's request frame with serializer id ser.
func serializedFrame(body []byte, ser byte) []byte {
	var h exchange.Header
	h.Request, h.TwoWay, h.Serializer, h.ID, h.Length = true, true, ser, 1, uint32(len(body))
	b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
	h.Put(b)
	return append(b, body...)
}

// TestAttachmentLimits: over a bound, the provider refuses the request with
// an error naming the bound, and counts it.
func TestAttachmentLimits(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, &dubbo.Options{Attachments: serialize.MapLimits{MaxEntries: 4, MaxValue: 100}})
	g, u := export(t, srv, providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u)
	call := func(atts map[string]string) error {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Attachments: atts})
		return err
	}
	require.NoError(t, call(map[string]string{"a": "1", "b": strings.Repeat("v", 100)}))
	err := call(map[string]string{"a": "", "b": "", "c": "", "d": "", "e": ""})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, "attachments")
	require.ErrorContains(t, err, "map of 5 entries, limit 4")
	err = call(map[string]string{"big": strings.Repeat("v", 101)})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, `map value of 101 bytes for key "big", limit 100`)
	require.Equal(t, uint64(2), srv.Stats().BadAttachments)
	require.Equal(t, int64(1), g.calls.Load())
}

// hostileProvider answers every request on one connection with body.
func hostileProvider(t *testing.T, body []byte) *protocol.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			h, err := fakepeer.SkipFrame(c)
			if err != nil {
				return
			}
			if h.Event {
				continue
			}
			resp := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(len(body))}
			out := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
			resp.Put(out)
			if _, err := c.Write(append(out, body...)); err != nil {
				return
			}
		}
	}()
	a := l.Addr().(*net.TCPAddr)
	return protocol.NewURL("dubbo", "127.0.0.1", a.Port, "demo.Greeter", map[string]string{protocol.KeyTimeout: "10000"})
}

// TestHostileProviderResponse: a provider that answers with an attachment
// bomb or a typed-slice bomb costs the consumer no more than its response's
// size allows, and the call fails with ErrBadResponse, counted.
func TestHostileProviderResponse(t *testing.T) {
	for name, c := range map[string]struct {
		body  []byte
		reply any
		want  string
	}{
		"attachment bomb":  {append([]byte{0x02}, attachmentBomb(4<<20)...), nil, "limit 64"},
		"typed slice bomb": {append([]byte{0x01}, sliceBomb(1 << 20)[1:]...), new([]wide), "would allocate more than"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			// FrameTimeout: the 4 MiB response took over the 5 s default
			// to arrive under -race at load 20; the test is about memory
			// and the error, not the slow-loris bound.
			cli := newProtocol(t, &dubbo.Options{MaxPayload: 16 << 20, FrameTimeout: testTimeout})
			inv := refer(t, cli, hostileProvider(t, c.body))
			var err error
			got := allocatedDuring(func() {
				_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: c.reply})
			})
			require.ErrorIs(t, err, status.ErrBadResponse)
			require.ErrorIs(t, err, serialize.ErrLimit)
			require.ErrorContains(t, err, c.want)
			require.Less(t, got, uint64(4*len(c.body)+64<<10), "a %d-byte response cost %d bytes", len(c.body), got)
			st := cli.Stats()
			require.Equal(t, uint64(1), st.BadAttachments+st.BadBodies)
		})
	}
}

// TestTokenBeforeArguments: with a token, a request without it, or with a
// wrong one, is refused before its arguments are decoded (a slice bomb in
// them is never looked at), for every method including $echo.
func TestTokenBeforeArguments(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	b := &batcher{u: providerURL("demo.Batch", protocol.KeyToken, "s3cret")}
	exp, err := srv.Export(b)
	require.NoError(t, err)
	u := exp.(*dubbo.Exporter).URL()

	for _, atts := range []map[string]string{nil, {protocol.KeyToken: "guess"}} {
		body := head(t, "demo.Batch", "Batch", 1000, msgpackMap(t, atts), sliceBomb(1<<20))
		code, msg, err := rawCall(t, u.Address(), rawFrame(body, uint32(len(body))))
		require.NoError(t, err)
		require.Equal(t, status.BadRequest, code)
		require.Contains(t, msg, "invalid token")
		require.NotContains(t, msg, "allocate", "the arguments were not decoded")
	}
	inv := refer(t, newProtocol(t, nil), u)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: service.EchoMethod, Args: []any{"ping"}})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, "invalid token: missing token for demo.Batch.$echo")
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: service.EchoMethod, Args: []any{"ping"},
		Attachments: map[string]string{protocol.KeyToken: "s3cret"}})
	require.NoError(t, err)
	require.Equal(t, "ping", res.Value)
	res, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Batch", Args: []any{[]wide{{A: 1}}},
		Attachments: map[string]string{protocol.KeyToken: "s3cret"}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Value)
	st := srv.Stats()
	require.Equal(t, uint64(3), st.BadTokens)
	require.Zero(t, st.BadBodies)
	require.Equal(t, int64(1), b.calls.Load())
}

// TestOnlyExportedSerialization: a service exported with msgpack refuses a
// request in json, which a client may pick in the header.
func TestOnlyExportedSerialization(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, nil)
	g, u := export(t, srv, providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u.With(protocol.KeySerialization, serialize.JSON))
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, status.ErrBadRequest)
	require.ErrorContains(t, err, "demo.Greeter is exported with serialization msgpack, the request uses json")
	require.Equal(t, uint64(1), srv.Stats().BadSerializations)
	require.Zero(t, g.calls.Load())

	_, u2 := export(t, srv, providerURL("demo.JSON", protocol.KeySerialization, serialize.JSON))
	res, err := refer(t, newProtocol(t, nil), u2).Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
	require.Equal(t, "hello x", res.Value)
}

// TestProviderBoundsEveryContext: a request asking for no timeout, or for
// more than the provider allows, runs with the provider's maximum.
func TestProviderBoundsEveryContext(t *testing.T) {
	srv := newProtocol(t, &dubbo.Options{MaxProviderTimeout: 3 * time.Second})
	_, u := export(t, srv, providerURL("demo.Greeter"))
	for _, timeout := range []int64{0, -5, 1 << 62} {
		body := head(t, "demo.Greeter", "Deadline", timeout, msgpackMap(t, nil), []byte{0x00})
		code, msg, err := rawCall(t, u.Address(), rawFrame(body, uint32(len(body))))
		require.NoError(t, err)
		require.Equal(t, status.OK, code, msg)
		dec, err := serialize.NewMsgpack().NewDecoder([]byte(msg))
		require.NoError(t, err)
		kind, err := dec.DecodeInt()
		require.NoError(t, err)
		require.EqualValues(t, 1, kind)
		left, err := dec.DecodeInt()
		require.NoError(t, err)
		dec.Release()
		require.Greater(t, left, int64(0), "timeout %d: the method's context has a deadline", timeout)
		require.LessOrEqual(t, left, int64(3000), "timeout %d: capped by MaxProviderTimeout", timeout)
	}
}

// TestFirstDialOutlivesCaller: the first call's context does not own the
// connection's first dial: a caller that has already given up gets its own
// error, and the next caller is served at once (the connection was not
// marked down for everyone).
func TestFirstDialOutlivesCaller(t *testing.T) {
	ctx := testCtx(t)
	_, u := export(t, newProtocol(t, nil), providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err := inv.Invoke(gone, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.ErrorIs(t, err, context.Canceled)
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"y"}})
	require.NoError(t, err)
	require.Equal(t, "hello y", res.Value)
}

// TestMaxConnections: a provider port keeps at most MaxConnections open;
// one more is closed at once and counted, and the consumer already
// connected is served.
func TestMaxConnections(t *testing.T) {
	ctx := testCtx(t)
	srv := newProtocol(t, &dubbo.Options{MaxConnections: 1})
	_, u := export(t, srv, providerURL("demo.Greeter"))
	inv := refer(t, newProtocol(t, nil), u)
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
	extra, err := net.Dial("tcp", u.Address())
	require.NoError(t, err)
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(testTimeout))
	_, err = extra.Read(make([]byte, 1))
	require.Error(t, err, "closed at once")
	require.Equal(t, uint64(1), srv.Stats().RefusedConnections)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
}
