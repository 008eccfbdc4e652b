package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
)

// TestInvokeURLFlagErrors: a -url that is not host:port[,host:port...]
// is refused before anything is dialled, in one line that names the flag
// and says what to write (it said "config: references.cli.url: ...",
// a YAML key the CLI user never wrote).
func TestInvokeURLFlagErrors(t *testing.T) {
	for url, want := range map[string]string{
		"20880":                  `-url "20880" is a port alone; write host:port, such as -url 127.0.0.1:20880`,
		"http://127.0.0.1:20880": `-url "http://127.0.0.1:20880": unknown scheme "http" (known: dubbo); write host:port[,host:port...], such as -url 127.0.0.1:20880`,
		":20880":                 `-url ":20880": no host before the port; write host:port, such as -url 127.0.0.1:20880`,
		"127.0.0.1:99999":        `-url "127.0.0.1:99999": port 99999 is out of range (1-65535)`,
		"h:1,127.0.0.1:x":        `-url "127.0.0.1:x": port "x" is not a number; write host:port[,host:port...], such as -url 127.0.0.1:20880`,
		"localhost":              `-url "localhost" is not host:port (address localhost: missing port in address); write host:port[,host:port...]`,
	} {
		out, errOut, code := runCLI(t, "invoke", "-url", url, "-service", "S", "-method", "M")
		assert.Equal(t, 2, code, url)
		assert.Empty(t, out, url)
		assert.True(t, strings.HasPrefix(errOut, "minidubbo invoke: "+want), "%s: %s", url, errOut)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	}
	// What the flag takes still works: dubbo:// and several providers.
	require.NoError(t, checkURLFlag("dubbo://127.0.0.1:20880, 10.0.0.2:20880"))
}

type hintGreeter struct{}

func (hintGreeter) SayHello(_ context.Context, name string) (string, error) {
	return "hello " + name, nil
}

// TestInvokeDirectHints: a direct call (-url) that fails in a way a
// newcomer meets says what to do on the next line: a service asked for
// without its version names what it asked for, a method called without
// -args says how to give them, one for an interface the provider does not
// serve says to check the name, and a refused dial asks whether a provider
// runs at that address.
func TestInvokeDirectHints(t *testing.T) {
	ctx := context.Background()
	app, err := config.New(&config.Config{
		Services: map[string]config.ServiceConfig{"g": {Interface: "cli.Hint", Version: "1.0.0"}},
	})
	require.NoError(t, err)
	defer app.Shutdown(ctx)
	u, err := app.Export(ctx, "g", hintGreeter{})
	require.NoError(t, err)

	out, errOut, code := runCLI(t, "invoke", "-url", u.Address(), "-service", "cli.Hint", "-method", "SayHello", "-args", `["x"]`)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no service cli.Hint on port "+strconv.Itoa(u.Port)+`; it serves cli.Hint with version "1.0.0" and no group (`)
	assert.True(t, strings.HasSuffix(errOut, "\n(this call asked for cli.Hint with no version and no group; "+
		"give -version and -group as the provider exported it)\n"), errOut)
	assert.NotContains(t, errOut, "minidubbo ls", "no registry was asked: %s", errOut)

	_, errOut, code = runCLI(t, "invoke", "-url", u.Address(), "-service", "cli.Hnt", "-version", "1.0.0", "-method", "SayHello", "-args", `["x"]`)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no service cli.Hnt:1.0.0 on port "+strconv.Itoa(u.Port)+", nor cli.Hnt with any other version or group (")
	assert.True(t, strings.HasSuffix(errOut, "\n(this call asked for -service cli.Hnt: give the interface name the provider exported)\n"), errOut)
	assert.NotContains(t, errOut, "minidubbo ls", "no registry was asked: %s", errOut)

	_, errOut, code = runCLI(t, "invoke", "-url", u.Address(), "-service", "cli.Hint", "-version", "1.0.0", "-method", "SayHello")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "takes 1 argument, got 0")
	assert.True(t, strings.HasSuffix(errOut, "\n(no -args were given: the arguments go in a JSON array, such as -args '[\"world\"]')\n"), errOut)

	out, errOut, code = runCLI(t, "invoke", "-url", u.Address(), "-service", "cli.Hint", "-version", "1.0.0", "-method", "SayHello", "-args", `["x"]`, "-json")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "\"hello x\"\n", out)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := l.Addr().String()
	require.NoError(t, l.Close())
	_, errOut, code = runCLI(t, "invoke", "-url", refused, "-service", "cli.Hint", "-version", "1.0.0", "-method", "SayHello", "-args", `["x"]`)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "dial failed: "+refused)
	assert.True(t, strings.HasSuffix(errOut, "\n(is a provider running there? -url takes the host:port it serves on)\n"), errOut)
}

// TestInvokeTimeoutHint: a provider that does not answer within -timeout
// (here a port that takes the connection and never answers) ends the call
// with the timeout and what to change.
func TestInvokeTimeoutHint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	out, errOut, code := runCLI(t, "invoke", "-url", l.Addr().String(), "-service", "cli.Silent", "-method", "M",
		"-args", `["x"]`, "-timeout", "300ms")
	require.NoError(t, l.Close())
	if c, ok := <-accepted; ok {
		_ = c.Close()
	}
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasSuffix(errOut, "\n(the call had -timeout 300ms: give a longer one if the method is slow)\n"), errOut)
}
