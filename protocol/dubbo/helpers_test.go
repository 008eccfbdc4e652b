package dubbo_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/service"
)

// testTimeout bounds a test (and is the call timeout of tests that
// assert what arrives, not how soon): under -race at load 20 on two
// cores the package's heavier tests took 10-14 s, over the 10 s this
// used to be.
const testTimeout = 60 * time.Second

// testTimeoutMillis is testTimeout as a URL's timeout parameter.
var testTimeoutMillis = strconv.Itoa(int(testTimeout / time.Millisecond))

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// greeter is a hand-written provider invoker with typed methods.
type greeter struct {
	u       *protocol.URL
	calls   atomic.Int64
	release chan struct{} // Block waits on it
	// started receives a value when Block starts, if there is room. It is
	// made with the greeter, before any call can read it: the race
	// detector does not count a TCP round trip as synchronization.
	started chan struct{}

	keptMu sync.Mutex
	kept   [][]byte // the arguments of Keep
}

type Person struct {
	Name string `msgpack:"name" json:"name"`
	Age  int    `msgpack:"age" json:"age"`
}

var (
	stringT = reflect.TypeFor[string]()
	intT    = reflect.TypeFor[int]()
	personT = reflect.TypeFor[Person]()
	bytesT  = reflect.TypeFor[[]byte]()
)

func (g *greeter) URL() *protocol.URL { return g.u }

func (g *greeter) ArgTypes(method string) ([]reflect.Type, bool) {
	switch method {
	case "SayHello", "Fail", "Attach":
		return []reflect.Type{stringT}, true
	case "Add":
		return []reflect.Type{intT, intT}, true
	case "Greet":
		return []reflect.Type{personT}, true
	case "Panic", "Block", "Nothing", "Deadline":
		return nil, true
	case "Big":
		return []reflect.Type{intT}, true
	case "Bytes", "Keep":
		return []reflect.Type{bytesT}, true
	}
	return nil, false
}

func (g *greeter) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	g.calls.Add(1)
	switch inv.Method {
	case "SayHello":
		return &protocol.Result{Value: "hello " + inv.Args[0].(string)}, nil
	case "Add":
		return &protocol.Result{Value: inv.Args[0].(int) + inv.Args[1].(int)}, nil
	case "Greet":
		p := inv.Args[0].(Person)
		return &protocol.Result{Value: Person{Name: "dear " + p.Name, Age: p.Age + 1}}, nil
	case "Fail":
		return nil, fmt.Errorf("wrapped: %w", service.Errorf(service.CodeNotFound, "no %s", inv.Args[0]))
	case "Panic":
		panic("boom")
	case "Nothing":
		return &protocol.Result{}, nil
	case "Attach":
		v := inv.Attachment(inv.Args[0].(string))
		return &protocol.Result{Value: v, Attachments: map[string]string{"back": "yes"}}, nil
	case "Block":
		select {
		case g.started <- struct{}{}:
		default:
		}
		<-g.release // ignores ctx: the consumer's timeout must fire first
		return &protocol.Result{Value: "released"}, nil
	case "Deadline":
		dl, ok := ctx.Deadline()
		if !ok {
			return &protocol.Result{Value: int64(-1)}, nil
		}
		return &protocol.Result{Value: time.Until(dl).Milliseconds()}, nil
	case "Big":
		return &protocol.Result{Value: strings.Repeat("x", inv.Args[0].(int))}, nil
	case "Bytes":
		return &protocol.Result{Value: inv.Args[0]}, nil
	case "Keep":
		// Keeps its argument after the call, as a method may, and
		// answers with it as well.
		g.keptMu.Lock()
		g.kept = append(g.kept, inv.Args[0].([]byte))
		g.keptMu.Unlock()
		return &protocol.Result{Value: inv.Args[0]}, nil
	}
	return nil, fmt.Errorf("unexpected method %s", inv.Method)
}

// providerURL is a provider's URL on 127.0.0.1 with params. Its calls'
// timeout is testTimeoutMillis unless params set one: a consumer's first
// call also waits for the dial, and under -race on two loaded cores a
// first call (dial + call) took up to 221 ms at load 6, too near the 1 s
// default for a test that asserts what arrives, not how soon.
func providerURL(iface string, params ...string) *protocol.URL {
	m := map[string]string{protocol.KeyTimeout: testTimeoutMillis}
	for i := 0; i+1 < len(params); i += 2 {
		m[params[i]] = params[i+1]
	}
	return protocol.NewURL("dubbo", "127.0.0.1", 0, iface, m)
}

// newProtocol returns a Protocol closed at the end of the test.
type dubboOptions = dubbo.Options

func newProtocol(t testing.TB, opts *dubbo.Options) *dubbo.Protocol {
	p, err := dubbo.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// export serves a greeter and returns it with the exported URL.
func export(t testing.TB, p *dubbo.Protocol, u *protocol.URL) (*greeter, *protocol.URL) {
	g := &greeter{u: u, release: make(chan struct{}), started: make(chan struct{}, 1)}
	exp, err := p.Export(g)
	require.NoError(t, err)
	return g, exp.(*dubbo.Exporter).URL()
}

// refer returns an invoker for u, closed at the end of the test.
func refer(t testing.TB, p *dubbo.Protocol, u *protocol.URL) protocol.Invoker {
	inv, err := p.Refer(u)
	require.NoError(t, err)
	t.Cleanup(func() { inv.(interface{ Close() error }).Close() })
	return inv
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func itoa(n int) string { return strconv.Itoa(n) }
