package hello_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/zktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if progs.dir != "" {
			_ = os.RemoveAll(progs.dir)
		}
		os.Exit(code)
	}))
}

// progs holds the provider and the consumer, built once for the
// package's tests (see programs).
var progs struct {
	once sync.Once
	dir  string
	err  error
}

// programs builds the provider and the consumer on first use, in one go
// build (which links both at once), and returns their directory; TestMain
// removes it. Three tests used to build both, one program at a time: six
// go builds of about 4 s each on a quiet machine, several times that under
// load.
func programs(t *testing.T, ctx context.Context) string {
	t.Helper()
	progs.once.Do(func() {
		if progs.dir, progs.err = os.MkdirTemp("", "hello-programs-"); progs.err != nil {
			return
		}
		// The build has a bound of its own, not the calling test's (2-3
		// min, shared with its scenario): under -race and load it takes
		// a good part of a minute, more with a cold cache.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(bctx, "go", "build", "-o", progs.dir+string(filepath.Separator), "./provider", "./consumer").CombinedOutput()
		if err != nil {
			progs.err = fmt.Errorf("go build ./provider ./consumer: %w: %s", err, out)
		}
	})
	require.NoError(t, progs.err)
	return progs.dir
}

type summary struct {
	Calls        int64            `json:"calls"`
	OK           int64            `json:"ok"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	ByProvider   map[string]int64 `json:"by_provider"`
	P50          float64          `json:"p50_ms"`
	P99          float64          `json:"p99_ms"`
}

var servingLine = regexp.MustCompile(`^serving (\S+) at (\S+) \(weight (\d+)\)$`)

// TestHelloAgainstZooKeeper runs three providers of weights 1, 2 and 3
// and the consumer as real processes against a real ZooKeeper: round robin
// splits 600 calls exactly 100/200/300; after one provider is stopped
// gracefully, the others take every call.
func TestHelloAgainstZooKeeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	zkc := zktest.Start(t)
	dir := programs(t, ctx)
	type proc struct {
		cmd   *exec.Cmd
		addr  string
		lines *bufio.Scanner
	}
	var provs []*proc
	for i, w := range []string{"1", "2", "3"} {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-registry", zkc.Address(), "-weight", w, "-name", "p"+w)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		p := &proc{cmd: cmd, lines: bufio.NewScanner(stdout)}
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		})
		require.True(t, p.lines.Scan(), "provider %d printed nothing", i)
		m := servingLine.FindStringSubmatch(p.lines.Text())
		require.NotNil(t, m, "provider printed %q", p.lines.Text())
		p.addr = m[2]
		provs = append(provs, p)
	}

	consume := func(args ...string) (summary, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "consumer"), append([]string{"-registry", zkc.Address(), "-json"}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		var s summary
		require.NoError(t, json.Unmarshal(out, &s), "consumer printed %q", out)
		return s, code
	}

	s, code := consume("-loadbalance", "roundrobin", "-calls", "600", "-concurrency", "1")
	require.Equal(t, 0, code)
	assert.Equal(t, int64(600), s.Calls)
	assert.Equal(t, int64(600), s.OK)
	assert.Equal(t, int64(0), s.Errors)
	assert.Equal(t, map[string]int64{provs[0].addr: 100, provs[1].addr: 200, provs[2].addr: 300}, s.ByProvider)
	assert.Greater(t, s.P99, 0.0)

	s, code = consume("-loadbalance", "random", "-calls", "3000", "-concurrency", "4")
	require.Equal(t, 0, code)
	assert.Equal(t, int64(3000), s.OK)
	// Weighted random: shares near 1/6, 2/6, 3/6 (each within 5 points).
	for i, p := range provs {
		share := float64(s.ByProvider[p.addr]) / 3000
		assert.InDelta(t, float64(i+1)/6, share, 0.05, "provider %s", p.addr)
	}

	// Stop p3 gracefully; it exits 0 and the next run spreads over p1, p2.
	require.NoError(t, provs[2].cmd.Process.Signal(os.Interrupt))
	require.NoError(t, provs[2].cmd.Wait())
	var left summary
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) { // the registry tells consumers within a moment
		left, code = consume("-loadbalance", "roundrobin", "-calls", "300", "-concurrency", "1")
		require.Equal(t, 0, code, "no call may fail while a provider leaves: %+v", left)
		if len(left.ByProvider) == 2 {
			break
		}
	}
	assert.Equal(t, map[string]int64{provs[0].addr: 100, provs[1].addr: 200}, left.ByProvider)

	// No provider under that root: exit 2, saying how to start one.
	empty := zkc.Address() + "?root=nobody-here"
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", empty, "-calls", "1").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), "consumer: no provider of demo.hello.Greeter in the registry at "+empty+
		": start one first (go run ./examples/hello/provider -registry "+empty+")\nconfig: refer greeter: ")
	assert.Contains(t, string(out), "cluster: no provider demo.hello.Greeter; asked registry default: ")
	assert.NotContains(t, string(out), "(is a provider of", "config's advice after the example's own")

	// Failed calls say why: under each kind of error the summary prints the
	// first one (here a provider slower than the consumer's timeout; it
	// said only "error timeout 2").
	slowReg := zkc.Address() + "?root=slow"
	slow := exec.CommandContext(ctx, filepath.Join(dir, "provider"), "-registry", slowReg, "-delay", "1m", "-name", "slow")
	slow.Stderr = os.Stderr
	slowOut, err := slow.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, slow.Start())
	t.Cleanup(func() {
		_ = slow.Process.Kill()
		_ = slow.Wait()
	})
	slowLines := bufio.NewScanner(slowOut)
	require.True(t, slowLines.Scan(), "the slow provider printed nothing")
	m := servingLine.FindStringSubmatch(slowLines.Text())
	require.NotNil(t, m, "provider printed %q", slowLines.Text())
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", slowReg,
		"-calls", "2", "-concurrency", "1", "-retries", "0", "-timeout", "100ms").CombinedOutput()
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 1, ee.ExitCode())
	// The provider's context ends with the same 100 ms: either side may
	// give up first.
	assert.Regexp(t, `\n  error timeout                2\n    first: cluster: failover demo\.hello\.Greeter\.SayHello: `+
		`1 attempt failed: attempt 1 on `+regexp.QuoteMeta(m[2])+`: demo\.hello\.Greeter\.SayHello timed out after 100ms `+
		`on the (consumer calling|provider) `+regexp.QuoteMeta(m[2])+` \(reference timeout\)\n`+
		`    \(each call had -timeout 100ms: give a longer one, or find the slow provider `+
		`\(its avg in the consumer-side monitor lines\)\)\n`, string(out))

	// Bad flags: a clear error and a non-zero status.
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", zkc.Address(), "-loadbalance", "nope").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `unknown "nope"`)
	assert.Contains(t, string(out), "roundrobin")
}

// TestHelloRegistryUnreachable: with no ZooKeeper, the provider does not
// claim to serve and the consumer does not wait silently; both exit
// non-zero naming the registry they could not reach.
func TestHelloRegistryUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := programs(t, ctx)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := "zookeeper://" + l.Addr().String()
	require.NoError(t, l.Close())

	run := func(prog string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, prog), append([]string{"-registry", addr}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+dir) // no cached provider list
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s exited 0: %s %s", prog, o.String(), e.String())
		return o.String(), e.String(), ee.ExitCode()
	}
	out, errOut, code := run("provider")
	assert.Equal(t, 1, code)
	assert.Empty(t, out, "no 'serving' line")
	// What to do comes first, in the example's terms (its -registry
	// flag), then config's error without config's advice in YAML terms:
	// one piece of advice, the one that fits a program run with flags.
	assert.True(t, strings.Contains(errOut, "provider: the registry at "+addr+" did not answer: is ZooKeeper running there? "+
		"(in the minidubbo directory, make zk-start starts one on 127.0.0.1:2181; for one elsewhere, give -registry zookeeper://HOST:PORT)\n"+
		"config: export greeter: registry unreachable: registry default ("+addr+") did not answer within 5s; "+
		"service greeter not registered\n"), errOut)
	assert.NotContains(t, errOut, "registries.default.check", "config's YAML advice after the flag hint")

	// A -port another process holds: exit 1 before the registry is asked,
	// saying which flag to change.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	port := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
	out, errOut, code = run("provider", "-port", port)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasSuffix(errOut, "provider: -port: config: export greeter: dubbo: export: listen tcp 127.0.0.1:"+port+
		": bind: address already in use: port "+port+" of protocols.dubbo is taken by another process\n"+
		"(give -port a free port, or -port 0 for any free port)\n"), errOut)
	assert.NotContains(t, errOut, "set protocols.dubbo.port", "config's YAML advice beside the flag's")

	_, errOut, code = run("consumer", "-calls", "1")
	assert.Equal(t, 2, code)
	assert.Regexp(t, `(^|\n)consumer: the registry at `+regexp.QuoteMeta(addr)+` did not answer: is ZooKeeper running there\? `+
		`\(in the minidubbo directory, make zk-start starts one on 127\.0\.0\.1:2181; for one elsewhere, give -registry zookeeper://HOST:PORT\)\n`+
		`config: refer greeter: check: registry unreachable: cluster: no provider demo\.hello\.Greeter: no provider list within 5s .*; `+
		`asked registry default: `+regexp.QuoteMeta(addr)+` \(not connected for [\d.]+m?s; never listed the providers\)\n`, errOut)
}
