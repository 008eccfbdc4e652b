package direct_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProviderAndConsumer builds both programs, starts the provider on a
// free port, reads the address it prints, runs the consumer against it and
// checks what the consumer prints; then it interrupts the provider and
// checks that it stops cleanly.
func TestProviderAndConsumer(t *testing.T) {
	dir := t.TempDir()
	// One go build for the programs: it links them at once. It has a bound
	// of its own: the whole test took 55-56 s under -race with 2 CPU
	// burners (load ~25), most of it this build, against one 2 min bound.
	bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Minute)
	out, err := exec.CommandContext(bctx, "go", "build", "-o", dir+string(filepath.Separator), "./provider", "./consumer", "../../cmd/minidubbo").CombinedOutput()
	bcancel()
	require.NoError(t, err, "go build: %s", out)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	provider := exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-addr", "127.0.0.1:0")
	provider.Stderr = os.Stderr
	stdout, err := provider.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, provider.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = provider.Process.Kill()
			_ = provider.Wait()
		}
	})

	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "provider printed nothing: %v", lines.Err())
	first := lines.Text()
	const prefix = "provider: serving demo.Greeter version 1.0.0 on "
	require.True(t, strings.HasPrefix(first, prefix), "provider printed %q", first)
	addr := strings.TrimPrefix(first, prefix)
	require.False(t, strings.HasSuffix(addr, ":0"), "the printed address %q has the real port", addr)

	out, err = exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-addr", addr, "-name", "gopher").CombinedOutput()
	require.NoError(t, err, "consumer: %s", out)
	assert.Equal(t, strings.Join([]string{
		"echo: ping",
		"SayHello: hello, gopher (asked by consumer)",
		"Divide(7, 2): 3",
		"Divide(1, 0): business error, code 3, remote true: cannot divide 1 by zero",
	}, "\n")+"\n", string(out))

	// The command line, as the README shows it, with the version the
	// provider printed; without it the error says what to check.
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "minidubbo"), "invoke", "-url", addr, "-service", "demo.Greeter",
		"-version", "1.0.0", "-method", "SayHello", "-args", `["world"]`).CombinedOutput()
	require.NoError(t, err, "minidubbo invoke: %s", out)
	assert.Equal(t, `"hello, world"`+"\n", string(out))
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "minidubbo"), "invoke", "-url", addr, "-service", "demo.Greeter",
		"-method", "SayHello", "-args", `["world"]`).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `no service demo.Greeter on port `+addr[strings.LastIndex(addr, ":")+1:]+
		`; it serves demo.Greeter with version "1.0.0" and no group (a service is found by its interface, version and group together)`)
	assert.Contains(t, string(out), "\n(this call asked for demo.Greeter with no version and no group; give -version and -group as the provider exported it)\n")
	assert.NotContains(t, string(out), "minidubbo ls", "no registry is involved")

	// A second provider on the same address says what holds it and what to do.
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-addr", addr).CombinedOutput()
	require.Error(t, err)
	assert.True(t, strings.HasSuffix(string(out), "bind: address already in use\n(another process serves on "+addr+
		", perhaps a provider started before: stop it, or give -addr another port, -addr 127.0.0.1:0 for any free one)\n"), "%s", out)

	require.NoError(t, provider.Process.Signal(os.Interrupt))
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	require.NoError(t, provider.Wait(), "provider exit")
	exited = true
	assert.Equal(t, []string{"provider: stopped"}, rest)

	// Bad flags are reported, not panicked on.
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-addr", "nonsense").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `provider: bad -addr "nonsense"`)
	for a, want := range map[string]string{
		"20880":           `bad -addr "20880": a port alone; write host:port, such as -addr 127.0.0.1:20880`,
		"127.0.0.1:99999": `bad -addr "127.0.0.1:99999": port 99999 is out of range (0-65535, 0 for a free one when serving)`,
		"":                `bad -addr "": missing port in address; write host:port, such as -addr 127.0.0.1:20880`,
	} {
		out, err = exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-addr", a).CombinedOutput()
		require.Error(t, err, a)
		assert.Equal(t, "provider: "+want+"\n", string(out), a)
	}

	// A consumer pointed at nothing fails with a clear error, bounded in time.
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-addr", addr, "-timeout", "3s").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "consumer: echo: dial failed: "+addr)
	assert.True(t, strings.HasSuffix(string(out), "\n(is the provider running? go run ./examples/direct/provider -addr "+addr+" starts it)\n"), "%s", out)
}
