package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/examples/hello/greeter"
	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/service"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every test that talks to ZooKeeper or providers.
const testTimeout = 90 * time.Second

const calcInterface = "test.cli.Calc"

// calc is the test service: arithmetic, a business error, and echoes.
type calc struct{}

func (calc) Add(_ context.Context, a, b int64) (int64, error) { return a + b, nil }

func (calc) Div(_ context.Context, a, b int64) (int64, error) {
	if b == 0 {
		return 0, service.Errorf(service.CodeInvalidArgument, "division by zero")
	}
	return a / b, nil
}

// Kind names the Go type the argument arrived as on the provider.
func (calc) Kind(_ context.Context, v any) (string, error) { return fmt.Sprintf("%T", v), nil }

// Attachment returns the attachment key of the call.
func (calc) Attachment(ctx context.Context, key string) (string, error) {
	v, _ := service.Attachment(ctx, key)
	return v, nil
}

// fixture is a ZooKeeper with two providers of calc (A with weight 100 also
// serves the hello Greeter, B has weight 50), one consumer of calc, and
// one malformed provider node.
type fixture struct {
	zk           string   // registry address
	zkAddrs      []string // its host:port addresses
	addrA, addrB string   // calc providers, host:port
}

func startFixture(ctx context.Context, t *testing.T) *fixture {
	t.Helper()
	zkc := zktest.Start(t)
	f := &fixture{zk: zkc.Address(), zkAddrs: zkc.Addrs()}
	registries := func() map[string]config.RegistryConfig {
		return map[string]config.RegistryConfig{"zk": {
			Address:   zkc.Address(),
			CacheFile: filepath.Join(t.TempDir(), "cache"),
		}}
	}
	provider := func(name string, weight int, hello bool) string {
		noWarmup := time.Duration(0)
		svcs := map[string]config.ServiceConfig{
			"calc": {Interface: calcInterface, Version: "1.0", Weight: &weight, Warmup: &noWarmup},
		}
		if hello {
			svcs["greeter"] = config.ServiceConfig{Interface: greeter.Interface, Weight: &weight, Warmup: &noWarmup}
		}
		app, err := config.New(&config.Config{
			Application: config.ApplicationConfig{Name: "cli-test-" + name},
			Registries:  registries(),
			Protocols:   map[string]config.ProtocolConfig{"dubbo": {Host: "127.0.0.1"}},
			Services:    svcs,
			Shutdown:    config.ShutdownConfig{Timeout: 10 * time.Second},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
		u, err := app.Export(ctx, "calc", calc{})
		require.NoError(t, err)
		if hello {
			g := &greeter.Service{Name: name}
			gu, err := app.Export(ctx, "greeter", g)
			require.NoError(t, err)
			g.SetAddr(gu.Address())
		}
		return u.Address()
	}
	f.addrA = provider("A", 100, true)
	f.addrB = provider("B", 50, false)

	consumer, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "cli-test-consumer"},
		Registries:  registries(),
		References:  map[string]config.ReferenceConfig{"calc": {Interface: calcInterface, Version: "1.0"}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = consumer.Shutdown(context.Background()) })
	_, err = consumer.ReferGeneric(ctx, "calc")
	require.NoError(t, err)

	// A node name that is not a URL, as a broken tool might leave.
	raw := zktest.Client(t, zkc.Addrs()...)
	_, err = raw.Create("/dubbo/"+calcInterface+"/providers/not-a-url", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	// Export and Refer may return before their nodes are written (a
	// registration goes on in the background after RegisterWait): at load
	// ~23 ls once listed "consumers: 0". The commands are run once all the
	// fixture's nodes are there.
	want := map[string]int{
		"/dubbo/" + calcInterface + "/providers":     3, // A, B, not-a-url
		"/dubbo/" + calcInterface + "/consumers":     1,
		"/dubbo/" + greeter.Interface + "/providers": 1,
	}
	require.Eventually(t, func() bool {
		for p, n := range want {
			if kids, _, err := raw.Children(p); err != nil || len(kids) != n {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the fixture's nodes in ZooKeeper: %v", want)
	return f
}

func TestRegistryCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	f := startFixture(ctx, t)
	calcMethods := "Add,Attachment,Div,Kind"

	t.Run("ls text", func(t *testing.T) {
		first, second := f.addrA, f.addrB
		calcSigs := "      Add(int64, int64) (int64, error)\n" +
			"      Attachment(string) (string, error)\n" +
			"      Div(int64, int64) (int64, error)\n" +
			"      Kind(any) (string, error)\n"
		lineA := fmt.Sprintf("    %s version=1.0 weight=100 methods=%s application=cli-test-A\n", f.addrA, calcMethods) + calcSigs
		lineB := fmt.Sprintf("    %s version=1.0 weight=50 methods=%s application=cli-test-B\n", f.addrB, calcMethods) + calcSigs
		if first > second {
			lineA, lineB = lineB, lineA
		}
		out, errOut, code := runCLI(t, "ls", "-registry", f.zk)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "demo.hello.Greeter\n"+
			"  providers: 1\n"+
			fmt.Sprintf("    %s weight=100 methods=SayHello application=cli-test-A\n", greeterAddr(t, f))+
			"      SayHello(string) (*Reply, error)\n"+
			"  consumers: 0\n"+
			"\n"+
			"test.cli.Calc\n"+
			"  providers: 2\n"+
			lineA+lineB+
			"  consumers: 1\n"+
			"  malformed: 1\n", out)
	})

	t.Run("ls json one service", func(t *testing.T) {
		out, errOut, code := runCLI(t, "ls", "-registry", f.zk, "-service", calcInterface, "-json")
		require.Equal(t, 0, code, errOut)
		var l lsListing
		require.NoError(t, json.Unmarshal([]byte(out), &l), out)
		require.Len(t, l.Services, 1)
		s := l.Services[0]
		assert.Equal(t, calcInterface, s.Interface)
		assert.Equal(t, 1, s.Consumers)
		assert.Equal(t, 1, s.Malformed)
		require.Len(t, s.Providers, 2)
		byAddr := map[string]lsProvider{}
		for _, p := range s.Providers {
			byAddr[p.Address] = p
			assert.Equal(t, []string{"Add", "Attachment", "Div", "Kind"}, p.Methods)
			assert.Equal(t, []string{"Add(int64, int64) (int64, error)", "Attachment(string) (string, error)",
				"Div(int64, int64) (int64, error)", "Kind(any) (string, error)"}, p.Signatures)
			assert.Equal(t, "1.0", p.Version)
			assert.Contains(t, p.URL, "dubbo://"+p.Address+"/"+calcInterface+"?")
			assert.Contains(t, out, p.URL, "URLs are printed unescaped")
		}
		assert.Equal(t, 100, byAddr[f.addrA].Weight)
		assert.Equal(t, 50, byAddr[f.addrB].Weight)
		assert.Equal(t, "cli-test-B", byAddr[f.addrB].Application)
		assert.True(t, slices.IsSortedFunc(s.Providers, func(a, b lsProvider) int { return strings.Compare(a.Address, b.Address) }))
	})

	t.Run("ls unknown service", func(t *testing.T) {
		_, errOut, code := runCLI(t, "ls", "-registry", f.zk, "-service", "no.Such")
		assert.Equal(t, 1, code)
		assert.Equal(t, `minidubbo ls: service "no.Such" is not registered (known: demo.hello.Greeter, test.cli.Calc)`+"\n", errOut)
		_, errOut, code = runCLI(t, "ls", "-registry", f.zk, "-service", "test.cli.Clac")
		assert.Equal(t, 1, code)
		assert.Equal(t, `minidubbo ls: service "test.cli.Clac" is not registered; did you mean "test.cli.Calc"? (known: demo.hello.Greeter, test.cli.Calc)`+"\n", errOut)
	})

	t.Run("invoke prints the expected shape", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "1.0",
			"-method", "Add", "-args", `["two", "forty"]`)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "bad request")
		assert.True(t, strings.HasSuffix(errOut, "\nexpected: Add(int64, int64) (int64, error)\n"), errOut)

		_, errOut, code = runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "1.0",
			"-method", "Ad", "-args", `[1, 2]`)
		assert.Equal(t, 1, code)
		assert.True(t, strings.HasSuffix(errOut, `: service not found: dubbo: service test.cli.Calc:1.0 has no method "Ad"; did you mean "Add"? `+
			`(it has: Add, Attachment, Div, Kind)`+"\n"), errOut)
		assert.Equal(t, 1, strings.Count(errOut, "did you mean"), "said once: %s", errOut)
	})

	t.Run("invoke via registry", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "1.0",
			"-method", "Add", "-args", "[2, 40]")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "42\n", out)
	})

	t.Run("invoke sends integers as integers", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "1.0",
			"-method", "Kind", "-args", "[7]", "-json")
		require.Equal(t, 0, code, errOut)
		assert.NotContains(t, out, "float")
		assert.Contains(t, out, `"int`)
	})

	t.Run("invoke direct url pretty", func(t *testing.T) {
		ga := greeterAddr(t, f)
		out, errOut, code := runCLI(t, "invoke", "-url", ga, "-service", greeter.Interface,
			"-method", "SayHello", "-args", `["cli"]`)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, fmt.Sprintf("{\n  \"addr\": %q,\n  \"message\": \"hello, cli\",\n  \"name\": \"A\"\n}\n", ga), out)
		out, errOut, code = runCLI(t, "invoke", "-url", ga, "-service", greeter.Interface,
			"-method", "SayHello", "-args", `["<cli>"]`, "-json")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, fmt.Sprintf(`{"addr":%q,"message":"hello, <cli>","name":"A"}`+"\n", ga), out)
	})

	t.Run("invoke direct url to both", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-url", f.addrA+","+f.addrB, "-service", calcInterface, "-version", "1.0",
			"-method", "Attachment", "-args", `["trace"]`, "-attach", "trace=abc,other=x")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "\"abc\"\n", out)
	})

	t.Run("invoke business error", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "1.0",
			"-method", "Div", "-args", "[1, 0]")
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Equal(t, fmt.Sprintf("error (code %d): division by zero\n", service.CodeInvalidArgument), errOut)
	})

	t.Run("invoke unknown method", func(t *testing.T) {
		out, errOut, code := runCLI(t, "invoke", "-url", f.addrB, "-service", calcInterface, "-version", "1.0",
			"-method", "Mul", "-args", "[1, 2]")
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, `"Mul"`)
	})

	t.Run("invoke no provider", func(t *testing.T) {
		_, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", calcInterface, "-version", "9.9",
			"-method", "Add", "-args", "[1, 2]")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no provider")
		assert.Contains(t, errOut, calcInterface)
		// The registry lists other versions: what to change is said.
		assert.True(t, strings.HasSuffix(errOut, `(connected; registered: version "1.0" on 2 providers)`+"\n"+
			`(this call asked for `+calcInterface+` with version "9.9" and no group: give -version and -group as one of those registered; `+
			`minidubbo ls -service `+calcInterface+` prints them)`+"\n"), errOut)
	})

	// A misspelt service: invoke suggests the registered one nearest to it.
	t.Run("invoke misspelt service", func(t *testing.T) {
		_, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", "demo.hello.Greter",
			"-method", "SayHello", "-args", `["x"]`)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no provider")
		assert.Contains(t, errOut, `(service "demo.hello.Greter" is not registered; did you mean "demo.hello.Greeter"? (known: `)
		assert.NotContains(t, errOut, "(is a provider of", "config's advice beside the CLI's own")
	})

	// A service nobody provides: invoke fails, and leaves no node behind
	// that would make ls show the service.
	t.Run("invoke unprovided service leaves no nodes", func(t *testing.T) {
		const iface = "test.cli.Nobody"
		_, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", iface, "-method", "Add", "-args", "[1, 2]")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no provider")
		assert.NotContains(t, errOut, "did you mean")
		// An unknown name gets the known names.
		assert.Regexp(t, `\n\(service "test\.cli\.Nobody" is not registered \(known: [^)]*demo\.hello\.Greeter[^)]*\)\)\n$`, errOut)
		raw := zktest.Client(t, f.zkAddrs...)
		ok, _, err := raw.Exists("/dubbo/" + iface)
		require.NoError(t, err)
		assert.False(t, ok, "/dubbo/%s left behind", iface)
		out, errOut, code := runCLI(t, "ls", "-registry", f.zk)
		require.Equal(t, 0, code, errOut)
		assert.NotContains(t, out, iface)
	})

	// A node left in the registry for an address that no longer serves
	// its interface (here: provider A's, which serves calc and the
	// greeter): the provider's "no service" answer names none, and invoke
	// says the registration is what is wrong, not the name asked for.
	t.Run("invoke through a stale registration", func(t *testing.T) {
		const iface = "test.cli.Stale"
		raw := zktest.Client(t, f.zkAddrs...)
		node := "dubbo://" + f.addrA + "/" + iface + "?interface=" + iface + "&methods=Add&side=provider"
		for _, p := range []string{"/dubbo/" + iface, "/dubbo/" + iface + "/providers",
			"/dubbo/" + iface + "/providers/" + url.QueryEscape(node)} {
			_, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			require.NoError(t, err, p)
		}
		_, errOut, code := runCLI(t, "invoke", "-registry", f.zk, "-service", iface, "-method", "Add", "-args", "[1, 2]")
		assert.Equal(t, 1, code)
		_, port, _ := net.SplitHostPort(f.addrA)
		assert.Contains(t, errOut, "no service "+iface+" on port "+port+", nor "+iface+" with any other version or group (")
		assert.True(t, strings.HasSuffix(errOut, "\n(the registry lists that address as a provider of "+iface+", but what serves "+
			"there now does not serve it: a provider that stopped without unregistering? Its node goes when its ZooKeeper "+
			"session ends; minidubbo ls -service "+iface+" lists the addresses)\n"), errOut)
	})
}

// greeterAddr finds the address provider A serves the Greeter at.
func greeterAddr(t *testing.T, f *fixture) string {
	t.Helper()
	out, errOut, code := runCLI(t, "ls", "-registry", f.zk, "-service", greeter.Interface, "-json")
	require.Equal(t, 0, code, errOut)
	var l lsListing
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Len(t, l.Services, 1)
	require.Len(t, l.Services[0].Providers, 1)
	return l.Services[0].Providers[0].Address
}

func TestInvokeUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-method", "M"}, "-service is required: the interface to call (minidubbo ls lists the registered ones)"},
		{[]string{"-service", "S"}, "-method is required: the method to call (minidubbo ls -service IFACE prints its methods)"},
		{[]string{"-service", "S", "-method", "M", "-args", "[1,"}, `-args: not valid JSON: unexpected EOF; give a JSON array, quoted for the shell: -args '["world"]'`},
		{[]string{"-service", "S", "-method", "M", "-args", "world"}, `-args: not valid JSON: invalid character 'w' looking for beginning of value; give a JSON array, quoted for the shell: -args '["world"]'`},
		{[]string{"-service", "S", "-method", "M", "-args", `{"a": 1}`}, "-args: must be a JSON array, not an object"},
		{[]string{"-service", "S", "-method", "M", "-args", `"x"`}, "-args: must be a JSON array, not a string"},
		{[]string{"-service", "S", "-method", "M", "-args", `[1] [2]`}, "-args: extra data after the JSON array"},
		{[]string{"-service", "S", "-method", "M", "-args", ``}, `-args: empty; give a JSON array such as [] or [1, "a"]`},
		{[]string{"-service", "S", "-method", "M", "-attach", "k"}, `-attach: "k" is not name=value`},
		{[]string{"-service", "S", "-method", "M", "-url", "h:1", "-registry", "zookeeper://h:2"}, "give -registry or -url, not both"},
		{[]string{"-service", "S", "-method", "M", "-timeout", "0s"}, "-timeout must be positive"},
		{[]string{"-service", "S", "-method", "M", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"invoke"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, "minidubbo invoke: "+tc.want+"\n", errOut)
		})
	}
	_, errOut, code := runCLI(t, "invoke", "-bogus")
	assert.Equal(t, 2, code)
	assert.Equal(t, "minidubbo invoke: unknown flag -bogus (flags: -args, -attach, -group, -json, -method, -registry, -service, "+
		"-timeout, -tls, -tls-ca, -tls-cert, -tls-key, -tls-server-name, -url, -version)\n", errOut)
}

func TestParseArgsNumbers(t *testing.T) {
	got, err := parseArgs(`[1, -2, 2.5, 1e3, 9007199254740993, "s", [3], {"n": 4, "f": 0.5}, null, true]`)
	require.NoError(t, err)
	assert.Equal(t, []any{int64(1), int64(-2), 2.5, float64(1000), int64(9007199254740993), "s",
		[]any{int64(3)}, map[string]any{"n": int64(4), "f": 0.5}, nil, true}, got)
}

func TestLSUsageAndUnreachable(t *testing.T) {
	_, errOut, code := runCLI(t, "ls", "-registry", "etcd://h:1")
	assert.Equal(t, 2, code)
	assert.Equal(t, `minidubbo ls: -registry: zookeeper registry: address "etcd://h:1": unknown scheme "etcd" (known: zk, zookeeper)`+"\n", errOut)
	_, errOut, code = runCLI(t, "ls", "-timeout", "-1s")
	assert.Equal(t, 2, code)
	assert.Equal(t, "minidubbo ls: -timeout must be positive\n", errOut)

	// A port nobody listens on: no session within the timeout.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, errOut, code = runCLI(t, "ls", "-registry", "zookeeper://"+addr, "-timeout", "300ms")
	assert.Equal(t, 1, code)
	assert.Equal(t, "minidubbo ls: no ZooKeeper session with "+addr+" within 300ms\n"+
		"(is ZooKeeper running at "+addr+"? In the minidubbo directory, make zk-start starts one on 127.0.0.1:2181)\n", errOut)

	// invoke against the same: the registry is named as the trouble, with
	// what to do.
	out, errOut, code := runCLI(t, "invoke", "-registry", "zookeeper://"+addr, "-timeout", "300ms", "-service", "demo.S", "-method", "M")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errOut, "minidubbo invoke: no provider list for demo.S from zookeeper://"+addr+" within 300ms: "+
		"config: refer cli: check: registry unreachable: "), errOut)
	assert.True(t, strings.HasSuffix(errOut, "\n(is ZooKeeper running at zookeeper://"+addr+
		"? In the minidubbo directory, make zk-start starts one on 127.0.0.1:2181)\n"), errOut)
	assert.NotContains(t, errOut, "(is the registry running at that address?", "config's advice beside the CLI's own")
}
