package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/reporttest"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
)

// runningMonitor is serveMonitor on free ports, stopped by stop.
type runningMonitor struct {
	service, web string
	stop         func()
}

func startMonitor(t *testing.T, data string) *runningMonitor {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveMonitor(ctx, monitorConfig{
			listen: "127.0.0.1:0", http: "127.0.0.1:0", data: data, name: "test-monitor",
			retention: 24 * time.Hour, refresh: time.Second,
		}, func(s, w string) { addrs <- [2]string{s, w} })
	}()
	m := &runningMonitor{}
	select {
	case a := <-addrs:
		m.service, m.web = a[0], a[1]
	case err := <-done:
		cancel()
		t.Fatalf("monitor did not start: %v", err)
	case <-time.After(testTimeout):
		cancel()
		t.Fatal("monitor did not start in time")
	}
	stopped := false
	m.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(m.stop)
	return m
}

// sendReports sends the reports to the monitor service through the
// framework, as an application does. Each Collect is bounded by the
// test's context (testTimeout), not by the reference's default 1 s: the
// monitor stores every report in a SQLite transaction (pure Go, prune on
// the first one), and under the race detector on a loaded machine (load
// average 20) one passed 1 s. A report the monitor cannot store still
// fails the test, and a wedged Collect still ends with the context.
func sendReports(t *testing.T, addr string, reports ...*monitor.Report) {
	t.Helper()
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "sender"},
		References: map[string]config.ReferenceConfig{"monitor": {
			Interface: monitor.ServiceName, URL: addr, Timeout: testTimeout,
		}},
	})
	require.NoError(t, err)
	defer func() { _ = app.Shutdown(context.Background()) }()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var c monitor.CollectorClient
	require.NoError(t, app.Refer(ctx, "monitor", &c))
	for _, r := range reports {
		start := time.Now()
		require.NoError(t, c.Collect(ctx, r))
		if d := time.Since(start); d > time.Second {
			t.Logf("Collect took %v (the reference's default timeout is 1s)", d.Round(time.Millisecond))
		}
	}
}

func TestMonitorAndReport(t *testing.T) {
	data := t.TempDir()
	m := startMonitor(t, data)
	now := time.Now()
	ms := time.Millisecond
	shop := reporttest.Report("shop", "10.0.0.9", 1, now.Add(-2*time.Minute), 10*time.Second,
		reporttest.Row(monitor.Consumer, "shop", "demo.Greeter", "SayHello", "", "shop@10.0.0.9",
			reporttest.Latencies(100, ms, 9*ms), map[string]int64{monitor.KindTimeout: 2}),
		reporttest.Row(monitor.Consumer, "shop", "demo.Greeter", "SayHello", "10.0.0.1:20880", "shop@10.0.0.9",
			reporttest.Latencies(70, ms, 9*ms), map[string]int64{monitor.KindTimeout: 2}),
		reporttest.Row(monitor.Consumer, "shop", "demo.Greeter", "SayHello", "10.0.0.2:20880", "shop@10.0.0.9",
			reporttest.Latencies(32, ms, 9*ms), nil))
	prov := reporttest.Report("hello-provider", "10.0.0.1:20880", 1, now.Add(-2*time.Minute), 10*time.Second,
		reporttest.Row(monitor.Provider, "hello-provider", "demo.Greeter", "SayHello", "10.0.0.1:20880", "shop@10.0.0.9",
			reporttest.Latencies(70, ms, 8*ms), nil))
	// The shop's report arrives twice (a retry): stored once.
	sendReports(t, m.service, shop, prov, shop)

	out, errOut, code := runCLI(t, "report", "-monitor", "http://"+m.web, "-since", "1h", "-format", "json")
	require.Equal(t, 0, code, errOut)
	var sum store.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Len(t, sum.Rows, 4)
	calls := map[string]int64{}
	for _, r := range sum.Rows {
		calls[r.Side+" "+r.Provider] = r.Calls
	}
	assert.Equal(t, map[string]int64{
		"consumer ": 100, "consumer 10.0.0.1:20880": 70, "consumer 10.0.0.2:20880": 32, "provider 10.0.0.1:20880": 70,
	}, calls)
	assert.Equal(t, map[string]int64{"timeout": 2}, sum.Rows[0].FailuresByKind)

	// The same from the data directory, while the server runs.
	out2, errOut, code := runCLI(t, "report", "-data", data, "-since", "1h", "-format", "json")
	require.Equal(t, 0, code, errOut)
	var sum2 store.Summary
	require.NoError(t, json.Unmarshal([]byte(out2), &sum2))
	assert.Equal(t, sum.Rows, sum2.Rows)

	// The table: aligned, one line per row, by provider.
	out, errOut, code = runCLI(t, "report", "-monitor", "http://"+m.web, "-since", "1h", "-by", "provider")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 5, out)
	assert.Contains(t, lines[0], "3 rows")
	assert.Regexp(t, `^SIDE +APPLICATION +SERVICE +PROVIDER +CALLS +OK +FAILED +QPS +AVG MS +P50 MS +P99 MS +MAX MS +FAILURES BY KIND$`, lines[1])
	assert.Regexp(t, `^consumer +shop +demo.Greeter +10.0.0.1:20880 +70 +68 +2 +7 .* timeout=2$`, lines[2])
	assert.Regexp(t, `^provider +hello-provider +demo.Greeter +10.0.0.1:20880 +70 +70 +0 +7 .* -$`, lines[4])
	callsCol := strings.Index(lines[1], "CALLS") + len("CALLS")
	for _, l := range lines[2:] {
		assert.Equal(t, byte(' '), l[callsCol], "numbers end under their heading: %q", l)
		assert.NotEqual(t, byte(' '), l[callsCol-1], "numbers end under their heading: %q", l)
	}

	out, errOut, code = runCLI(t, "report", "-data", data, "-since", "1h", "-format", "csv", "-by", "method")
	require.Equal(t, 0, code, errOut)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, []string{"consumer", "shop", "demo.Greeter", "SayHello", "", "", "100", "98", "2", "0", "2"}, recs[1][:11])

	// A restart keeps the history.
	m.stop()
	m = startMonitor(t, data)
	out, errOut, code = runCLI(t, "report", "-monitor", "http://"+m.web, "-since", "1h", "-format", "json")
	require.Equal(t, 0, code, errOut)
	var sum3 store.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum3))
	assert.Equal(t, sum.Rows, sum3.Rows)
	sendReports(t, m.service, shop)
	out, _, code = runCLI(t, "report", "-monitor", "http://"+m.web, "-since", "1h", "-format", "json", "-by", "method", "-service", "demo.Greeter")
	require.Equal(t, 0, code)
	sum3 = store.Summary{}
	require.NoError(t, json.Unmarshal([]byte(out), &sum3))
	assert.EqualValues(t, 100, sum3.Rows[0].Calls, "the re-sent report is still a duplicate after the restart")
}

func TestReportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-format", "xml"}, 2, `unknown -format "xml" (known: table, json, csv)`},
		{[]string{"-by", "host"}, 2, `unknown -by "host" (known: provider, consumer, method)`},
		{[]string{"-by", "provder"}, 2, `unknown -by "provder"; did you mean "provider"? (known: provider, consumer, method)`},
		{[]string{"-format", "jsn"}, 2, `unknown -format "jsn"; did you mean "json"? (known: table, json, csv)`},
		{[]string{"-since", "soon"}, 2, `since "soon": want a duration`},
		{[]string{"-monitor", "http://x", "-data", "/tmp"}, 2, "give -monitor or -data, not both"},
		{[]string{"-data", "/nonexistent/minidubbo"}, 1, "no monitor data in /nonexistent/minidubbo"},
		{[]string{"-data", "/nonexistent/minidubbo"}, 1, "\n(give -data the -data directory of minidubbo monitor; its default is " + defaultDataDir() + ")\n"},
		{[]string{"-monitor", "ftp://x"}, 2, `-monitor "ftp://x": want http://host:port, the -http address of minidubbo monitor`},
	} {
		_, errOut, code := runCLI(t, append([]string{"report"}, tc.args...)...)
		assert.Equal(t, tc.code, code, "%v", tc.args)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	_, errOut, code := runCLI(t, "monitor", "-retention", "forever")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `-retention "forever"`)
}

// What a newcomer gets wrong first: report with no monitor running, and a
// monitor whose -http port is taken. Each says what to give instead.
func TestMonitorAndReportNewcomerErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().String()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := closed.Addr().String()
	require.NoError(t, closed.Close())
	_, errOut, code := runCLI(t, "report", "-monitor", "http://"+nobody)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "connection refused")
	assert.True(t, strings.HasSuffix(errOut, "\n(is minidubbo monitor running there? give -monitor http://HOST:PORT of its -http, or -data DIR to read its data directory)\n"), errOut)
	// host:port, as the monitor's -http takes it, is read as http://host:port.
	_, errOut, code = runCLI(t, "report", "-monitor", nobody)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `Get "http://`+nobody+`/api/report`)
	assert.Contains(t, errOut, "connection refused")

	// No ZooKeeper: the command line's advice, not config's YAML key.
	_, errOut, code = runCLI(t, "monitor", "-registry", "zookeeper://"+nobody, "-http", "127.0.0.1:0", "-data", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Equal(t, "minidubbo monitor: the registry zookeeper://"+nobody+" did not answer, so the monitor service was not registered\n"+
		zooKeeperHint("zookeeper://"+nobody)+"\n"+
		"(or run the monitor without a registry, -registry \"\" -listen 127.0.0.1:20990, and give the applications that address)\n", errOut)

	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	err = serveMonitor(ctx, monitorConfig{
		listen: "127.0.0.1:0", http: taken, data: t.TempDir(), name: "test-monitor",
		retention: 24 * time.Hour, refresh: time.Second,
	}, func(string, string) { t.Error("the monitor started on a taken port") })
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Contains(t, err.Error(), "-http: listen tcp "+taken+": bind: address already in use (give -http 127.0.0.1:PORT with a free port)")

	// The monitor service's -listen port taken: the flag's advice, not
	// config's protocols.dubbo.port.
	err = serveMonitor(ctx, monitorConfig{
		listen: taken, http: "127.0.0.1:0", data: t.TempDir(), name: "test-monitor",
		retention: 24 * time.Hour, refresh: time.Second,
	}, func(string, string) { t.Error("the monitor started on a taken port") })
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.True(t, strings.HasPrefix(err.Error(), "-listen: config: export monitor: "), err.Error())
	assert.True(t, strings.HasSuffix(err.Error(), "bind: address already in use: port "+strconv.Itoa(l.Addr().(*net.TCPAddr).Port)+
		" of protocols.dubbo is taken by another process (give -listen 127.0.0.1:PORT with a free port, or port 0 for any free port)"), err.Error())
	assert.NotContains(t, err.Error(), "set protocols.dubbo.port")
}
