package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
)

// fuzzNow is the clock of the fuzz targets' stores and servers.
var fuzzNow = time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)

// fuzzServer is a Server over a new store (its clock fuzzNow) holding
// traffic's reports; both are closed at the end of the test.
func fuzzServer(tb testing.TB) *Server {
	now := func() time.Time { return fuzzNow }
	st, err := store.Open(tb.TempDir(), store.Options{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	// Few series: /metrics writes all it keeps, and FuzzCollect adds one
	// per input and reads /metrics after each (10,000 made a run of make
	// fuzz's 10,000 inputs take over 12 minutes).
	srv, err := New(st, Options{Now: now, MaxSeries: 64})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range traffic(fuzzNow) {
		if err := srv.Collect(context.Background(), r); err != nil {
			tb.Fatal(err)
		}
	}
	return srv
}

// checkServed runs a request for path and query on h: no panic, no status
// 500, and the APIs answer JSON (an object; with "error" when refused).
func checkServed(t *testing.T, h http.Handler, method, path, query string) int {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Method = method
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, "", query
	req.RequestURI = req.URL.RequestURI()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	code := w.Code
	if code >= 500 {
		t.Fatalf("%s %s?%s: status %d: %s", method, path, query, code, w.Body.String())
	}
	if strings.HasPrefix(path, "/api/") && (code == http.StatusOK || code == http.StatusBadRequest) {
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %s?%s: status %d, not a JSON object: %v: %.200q", method, path, query, code, err, w.Body.String())
		}
		if _, refused := v["error"]; refused != (code == http.StatusBadRequest) {
			t.Fatalf("%s %s?%s: status %d with %.200q", method, path, query, code, w.Body.String())
		}
	}
	return code
}

// FuzzDashboardQuery sends the dashboard's handler arbitrary methods,
// paths and query strings (anyone who reaches its port may): never a
// panic or a status 500, and its APIs answer JSON.
func FuzzDashboardQuery(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/report", "since=1h&by=provider"},
		{"GET", "/api/report", "since=0001-01-01T00:00:00Z&until=9999-12-31T23:59:59Z&service=demo.Greeter&by=consumer"},
		{"GET", "/api/service", "service=demo.Greeter&since=100000d"},
		{"GET", "/api/service", "service=%zz&since=-1h&until=1d"},
		{"GET", "/api/status", "since=2026-12-02T08:29:00+14:00"},
		{"GET", "/metrics", ""},
		{"GET", "/", "x=1"},
		{"POST", "/api/report", ""},
		{"GET", "/../app.js", ""},
		{"GET", "/api/report", "since=1h&since=2h&by=method&by=key"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	h := fuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, method, path, query string) {
		if len(method) > 16 || len(path)+len(query) > 4<<10 {
			return
		}
		if method == "" || strings.ContainsAny(method, " \t\r\n") || !strings.HasPrefix(path, "/") {
			return // not a request line net/http would pass on
		}
		checkServed(t, h, method, path, query)
	})
}

// FuzzCollect stores arbitrary reports (any process that can reach the
// monitor service may send one): each is stored or refused with an error,
// never a panic, and the dashboard then serves its service and window
// without a status 500.
func FuzzCollect(f *testing.F) {
	f.Add("shop", "10.0.0.9", uint64(1), int64(-60), int64(0), "consumer", "demo.Greeter", "SayHello", "10.0.0.1:20880",
		int64(10), int64(1), "timeout", []byte{1, 0, 0, 0, 3})
	f.Add("a", "", uint64(1<<63), int64(-1<<62), int64(1<<62), "provider", "s", "m", "", int64(1<<40), int64(0), "", []byte{})
	f.Add("a", "h", uint64(2), int64(-253402300800), int64(253402300799), "provider", "s", "m", "p", int64(0), int64(0), "other", []byte{0xff, 0xff, 0xff, 0x7f, 1})
	// A service name that is not UTF-8: stored, it made every later
	// /metrics a 500 (a Prometheus label must be UTF-8).
	f.Add("a", "h", uint64(3), int64(-60), int64(0), "consumer", "3\xe5\xda", "m", "", int64(1), int64(0), "", []byte{})
	srv := fuzzServer(f)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, app, host string, seq uint64, start, end int64, side, svc, method, provider string,
		calls, failures int64, kind string, lat []byte) {
		r := &monitor.Report{Application: app, Host: host, Seq: seq,
			Start: fuzzNow.Add(time.Duration(start) * time.Second), End: fuzzNow.Add(time.Duration(end) * time.Second)}
		if start < -1<<33 || end < -1<<33 || start > 1<<33 || end > 1<<33 {
			// Times far from now, beyond what a Duration of seconds reaches.
			r.Start, r.End = time.Unix(start, 0), time.Unix(end, 0)
		}
		w := monitor.Row{Side: monitor.Side(side), Application: app, Service: svc, Method: method, Provider: provider,
			Consumer: app + "@" + host, Calls: calls, Successes: calls - failures, Failures: failures}
		if kind != "" {
			w.FailuresByKind = map[string]int64{kind: failures}
		}
		for len(lat) >= 5 {
			w.Latency.Index = append(w.Latency.Index, int32(uint32(lat[0])|uint32(lat[1])<<8|uint32(lat[2])<<16|uint32(lat[3])<<24))
			w.Latency.Count = append(w.Latency.Count, int64(lat[4]))
			lat = lat[5:]
		}
		r.Rows = []monitor.Row{w}
		if err := srv.Collect(context.Background(), r); err != nil {
			return
		}
		q := "service=" + url.QueryEscape(svc) + "&since=" + url.QueryEscape(r.Start.Add(-time.Minute).Format(time.RFC3339)) +
			"&until=" + url.QueryEscape(r.End.Add(time.Minute).Format(time.RFC3339))
		checkServed(t, h, "GET", "/api/service", q)
		checkServed(t, h, "GET", "/api/report", q+"&by=provider")
		checkServed(t, h, "GET", "/api/status", "since=1h")
		checkServed(t, h, "GET", "/metrics", "")
	})
}

// TestReportNotUTF8Refused: a report whose names are not UTF-8 is
// refused, saying so, and /metrics keeps answering. Stored, its label
// made the Prometheus collector panic (recovered by the library) and
// every later /metrics a 500: one report from anyone who reaches the
// monitor broke the metrics for all (found by FuzzCollect).
func TestReportNotUTF8Refused(t *testing.T) {
	srv := fuzzServer(t)
	h := srv.Handler()
	for _, bad := range []func(r *monitor.Report){
		func(r *monitor.Report) { r.Application = "shop\xff" },
		func(r *monitor.Report) { r.Host = "\xc3(" },
		func(r *monitor.Report) { r.Rows[0].Service = "3\xe5\xda" },
		func(r *monitor.Report) { r.Rows[0].Method = "m\x80" },
		func(r *monitor.Report) { r.Rows[0].Provider = "\xed\xa0\x80" },
	} {
		r := traffic(fuzzNow)[0]
		r.Seq += 100
		bad(r)
		err := srv.Collect(context.Background(), r)
		if err == nil || !strings.Contains(err.Error(), "is not valid UTF-8") {
			t.Fatalf("a report with a name that is not UTF-8: %v", err)
		}
		if code := checkServed(t, h, "GET", "/metrics", ""); code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
	}
}
