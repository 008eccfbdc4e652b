package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/zktest"
	"github.com/minidubbo/minidubbo/monitor/store"
)

// proc is a program started by a test, its stdout read line by line.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startProc(t *testing.T, ctx context.Context, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads any more
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// line waits for the first line matching re and returns its submatches.
func (p *proc) line(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "%s ended before printing a line like %s", p.cmd.Path, re)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("%s printed no line like %s", p.cmd.Path, re)
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, p.cmd.Wait())
}

// TestMonitorEndToEnd runs the monitor server, a fast and a slow provider
// and a consumer as real processes against a real ZooKeeper, every
// application reporting each second. The monitor's report must hold
// exactly the calls the consumer made: per side, per provider, successes
// and failures; and still after the monitor was away for a while.
func TestMonitorEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes and ZooKeeper")
	}
	dir := t.TempDir()
	// One go build for the three programs (minidubbo, provider, consumer,
	// named after their directories): it checks and links them together
	// instead of one after another. It has a bound of its own: under -race
	// with 2 CPU burners at load 17 it took about 3 min of a run of 191 s
	// (83 s of 93 s with the cache warm), which had all shared one 4 min
	// bound; the scenario after it took 10-15 s.
	bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Minute)
	out, err := exec.CommandContext(bctx, "go", "build", "-o", dir+string(filepath.Separator),
		".", "../../examples/hello/provider", "../../examples/hello/consumer").CombinedOutput()
	bcancel()
	require.NoError(t, err, "go build: %s", out)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	zkc := zktest.Start(t)

	mon := startProc(t, ctx, filepath.Join(dir, "minidubbo"), "monitor", "-registry", zkc.Address(),
		"-http", "127.0.0.1:0", "-data", filepath.Join(dir, "data"))
	web := mon.line(t, regexp.MustCompile(`^dashboard at http://(\S+)/$`))[1]

	serving := regexp.MustCompile(`^serving \S+ at (\S+) `)
	fast := startProc(t, ctx, filepath.Join(dir, "provider"), "-registry", zkc.Address(), "-name", "fast", "-report-interval", "1s")
	fastAddr := fast.line(t, serving)[1]
	slow := startProc(t, ctx, filepath.Join(dir, "provider"), "-registry", zkc.Address(), "-name", "slow",
		"-delay", "1m", "-report-interval", "1s")
	slowAddr := slow.line(t, serving)[1]

	// Round robin without retries: half the calls go to the slow provider
	// and time out there. Every call must reach its provider for the
	// provider's counts below: a 50 ms timeout did not leave a loaded
	// machine time enough to send every one (the slow provider counted
	// 199 of 200), 2 s does; 100 callers wait out the 200 slow calls in
	// about two rounds of 2 s (40 callers took five, 10 s).
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", zkc.Address(), "-json",
		"-loadbalance", "roundrobin", "-cluster", "failfast", "-calls", "400", "-concurrency", "100",
		"-timeout", "2s", "-report-interval", "1s")
	cmd.Stderr = os.Stderr
	out, err = cmd.Output()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "consumer: %s", out)
	}
	var s struct {
		Calls, OK, Errors int64
		ErrorsByKind      map[string]int64 `json:"errors_by_kind"`
		ByProvider        map[string]int64 `json:"by_provider"`
	}
	require.NoError(t, json.Unmarshal(out, &s), "consumer printed %q", out)
	require.EqualValues(t, 400, s.Calls)
	require.Positive(t, s.Errors, "the slow provider's calls time out")
	require.Equal(t, map[string]int64{"timeout": s.Errors}, s.ErrorsByKind)
	fast.stop(t)
	slow.stop(t)

	// What the report must say, key by key.
	want := map[string][3]int64{ // calls, successes, failures
		"consumer|":              {s.Calls, s.OK, s.Errors},
		"consumer|" + fastAddr:   {s.Calls / 2, s.ByProvider[fastAddr], s.Calls/2 - s.ByProvider[fastAddr]},
		"consumer|" + slowAddr:   {s.Calls / 2, s.ByProvider[slowAddr], s.Calls/2 - s.ByProvider[slowAddr]},
		"provider|" + fastAddr:   {s.Calls / 2, -1, -1},
		"provider|" + slowAddr:   {s.Calls / 2, -1, -1},
		"consumer-timeouts|":     {s.ErrorsByKind["timeout"]},
		"consumer-timeouts|fast": {s.Calls/2 - s.ByProvider[fastAddr]},
	}
	var got map[string][3]int64
	var last string
	deadline := time.Now().Add(time.Minute)
	for {
		got, last = reportOf(t, ctx, web, fastAddr)
		if equalCounts(want, got) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.True(t, equalCounts(want, got), "want %v\ngot  %v\nreport:\n%s", want, got, last)

	// The monitor goes away while calls go on, and comes back on another
	// port with the same data: the applications keep their reports while
	// it is away and find it again in the registry; nothing is lost.
	mon.stop(t)
	third := startProc(t, ctx, filepath.Join(dir, "provider"), "-registry", zkc.Address(), "-name", "third", "-delay", "1ms", "-report-interval", "1s")
	thirdAddr := third.line(t, serving)[1]
	cmd = exec.CommandContext(ctx, filepath.Join(dir, "consumer"), "-registry", zkc.Address(), "-json",
		"-loadbalance", "roundrobin", "-duration", "7s", "-concurrency", "1", "-timeout", "10s", "-report-interval", "1s")
	cmd.Stderr = os.Stderr
	var consumerOut strings.Builder
	cmd.Stdout = &consumerOut
	require.NoError(t, cmd.Start())
	time.Sleep(3 * time.Second) // the outage, while the consumer calls
	mon = startProc(t, ctx, filepath.Join(dir, "minidubbo"), "monitor", "-registry", zkc.Address(),
		"-http", "127.0.0.1:0", "-data", filepath.Join(dir, "data"))
	web = mon.line(t, regexp.MustCompile(`^dashboard at http://(\S+)/$`))[1]
	require.NoError(t, cmd.Wait(), "consumer: %s", consumerOut.String())
	var s2 struct {
		Calls, OK  int64
		ByProvider map[string]int64 `json:"by_provider"`
	}
	require.NoError(t, json.Unmarshal([]byte(consumerOut.String()), &s2))
	require.Positive(t, s2.Calls)
	third.stop(t)
	want["consumer|"] = [3]int64{s.Calls + s2.Calls, s.OK + s2.OK, s.Errors}
	want["consumer|"+thirdAddr] = [3]int64{s2.Calls, s2.OK, 0}
	want["provider|"+thirdAddr] = [3]int64{s2.Calls, -1, -1}
	deadline = time.Now().Add(time.Minute)
	for {
		got, last = reportOf(t, ctx, web, fastAddr)
		if equalCounts(want, got) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.True(t, equalCounts(want, got), "after the outage: want %v\ngot  %v\nreport:\n%s", want, got, last)

	table, errOut, code := runCLI(t, "report", "-monitor", "http://"+web, "-since", "10m", "-by", "provider")
	require.Equal(t, 0, code, errOut)
	t.Logf("minidubbo report:\n%s", table)
	mon.stop(t)
}

// reportOf reads /api/report and keys its counts like TestMonitorEndToEnd's want.
func reportOf(t *testing.T, ctx context.Context, web, fastAddr string) (map[string][3]int64, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+web+"/api/report?since=10m&service=demo.hello.Greeter", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var sum store.Summary
	require.NoError(t, json.Unmarshal(body, &sum))
	got := map[string][3]int64{}
	var b strings.Builder
	for _, r := range sum.Rows {
		fmt.Fprintf(&b, "%s %s %s calls=%d ok=%d failed=%d %v\n", r.Side, r.Provider, r.Consumer, r.Calls, r.Successes, r.Failures, r.FailuresByKind)
		k := r.Side + "|" + r.Provider
		c := got[k]
		c[0] += r.Calls
		if r.Side == "consumer" {
			c[1] += r.Successes
			c[2] += r.Failures
		} else {
			c[1], c[2] = -1, -1
		}
		got[k] = c
		if r.Side == "consumer" && r.Provider == "" {
			got["consumer-timeouts|"] = [3]int64{got["consumer-timeouts|"][0] + r.FailuresByKind["timeout"]}
		}
		if r.Side == "consumer" && r.Provider == fastAddr {
			got["consumer-timeouts|fast"] = [3]int64{got["consumer-timeouts|fast"][0] + r.FailuresByKind["timeout"]}
		}
	}
	return got, b.String()
}

func equalCounts(a, b map[string][3]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
