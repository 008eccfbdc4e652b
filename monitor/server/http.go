package server

import (
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
)

//go:embed assets
var assets embed.FS

var index = template.Must(template.ParseFS(assets, "assets/index.html"))

// Handler serves the dashboard and the APIs:
//
//	/                 the dashboard (HTML, JS and SVG, all embedded)
//	/api/report       the report as JSON: ?since=1h&until=...&service=...&by=provider|consumer|method
//	/api/service      one service's history and peers: ?service=...&since=1h
//	/api/status       how many reports arrived, and how many their senders dropped: ?since=1h
//	/metrics          Prometheus text format
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = index.Execute(w, struct{ RefreshMillis int64 }{s.opts.Refresh.Milliseconds()})
	})
	mux.Handle("GET /app.js", files)
	mux.Handle("GET /style.css", files)
	mux.HandleFunc("GET /api/report", s.apiReport)
	mux.HandleFunc("GET /api/service", s.apiService)
	mux.HandleFunc("GET /api/status", s.apiStatus)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

// MaxSince bounds how far back a query may reach.
const MaxSince = 366 * 24 * time.Hour

// ParseSince reads a time back from now: a duration ("90s", "10m", "1h",
// "7d") or an RFC 3339 time. Empty means def.
func ParseSince(v string, now time.Time, def time.Duration) (time.Time, error) {
	if v == "" {
		return now.Add(-def), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("since %q: want a duration (10m, 1h, 7d) or an RFC 3339 time", v)
	}
	if d <= 0 || d > MaxSince {
		return time.Time{}, fmt.Errorf("since %q: want a duration above 0 and at most %v", v, MaxSince)
	}
	return now.Add(-d), nil
}

// ParseDuration is time.ParseDuration that also takes whole days ("7d").
func ParseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("bad number of days %q", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// checkParams refuses parameters the endpoint does not know, listing the
// ones it does.
func checkParams(r *http.Request, known ...string) error {
	for k := range r.URL.Query() {
		if !slices.Contains(known, k) {
			return fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

func (s *Server) window(r *http.Request) (since, until time.Time, err error) {
	now := s.opts.Now()
	until = now
	if v := r.URL.Query().Get("until"); v != "" {
		if until, err = ParseSince(v, now, 0); err != nil {
			return since, until, errors.New(strings.Replace(err.Error(), "since", "until", 1))
		}
	}
	since, err = ParseSince(r.URL.Query().Get("since"), now, time.Hour)
	return since, until, err
}

func (s *Server) apiReport(w http.ResponseWriter, r *http.Request) {
	if err := checkParams(r, "since", "until", "service", "by"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	since, until, err := s.window(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	q := r.URL.Query()
	sum, err := s.st.Query(r.Context(), store.Query{Since: since, Until: until, Service: q.Get("service"), By: q.Get("by")})
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, sum)
}

func (s *Server) apiStatus(w http.ResponseWriter, r *http.Request) {
	if err := checkParams(r, "since"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	since, err := ParseSince(r.URL.Query().Get("since"), s.opts.Now(), time.Hour)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	st, err := s.st.Stats(r.Context(), since)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, st)
}

// ServiceView is one service's part of the dashboard: its history per side
// and its providers' and consumers' counts side by side.
type ServiceView struct {
	Service string    `json:"service"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	// Series holds a point per minute for "consumer" (calls as the
	// applications made them) and "provider" (calls served).
	Series    map[string][]store.Point `json:"series"`
	Providers []ProviderCount          `json:"providers"`
	Consumers []ConsumerCount          `json:"consumers"`
}

// ProviderCount is what one provider of a service got.
type ProviderCount struct {
	Provider string `json:"provider"`
	// ConsumerCalls and ConsumerFailures are the attempts the consumers
	// sent it, as they counted them; ConsumerP99Ms their p99 latency.
	ConsumerCalls    int64   `json:"consumer_calls"`
	ConsumerFailures int64   `json:"consumer_failures"`
	ConsumerP99Ms    float64 `json:"consumer_p99_ms"`
	// ProviderCalls and ProviderFailures are the calls it served, as it
	// counted them; ProviderP99Ms their p99 latency.
	ProviderCalls    int64   `json:"provider_calls"`
	ProviderFailures int64   `json:"provider_failures"`
	ProviderP99Ms    float64 `json:"provider_p99_ms"`
	// Slow marks a provider whose p99 (as its consumers saw it, or as it
	// served when no consumer reported) is more than SlowFactor times the
	// median of its peers' and at least SlowMargin above it. Only
	// providers with SlowMinCalls calls or more are judged and count as
	// peers.
	Slow bool `json:"slow"`
}

// ConsumerCount is what one consumer of a service did.
type ConsumerCount struct {
	Consumer string `json:"consumer"`
	// ConsumerCalls are the calls it made, as it counted them (once per
	// call, retries not counted again); ProviderCalls the calls the
	// providers served it, as they counted them (retries included).
	ConsumerCalls int64 `json:"consumer_calls"`
	ProviderCalls int64 `json:"provider_calls"`
}

// The slow-provider rule of ProviderCount.Slow.
const (
	SlowFactor   = 2
	SlowMargin   = 2 * time.Millisecond
	SlowMinCalls = 20
)

func (s *Server) apiService(w http.ResponseWriter, r *http.Request) {
	if err := checkParams(r, "since", "until", "service"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	since, until, err := s.window(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	service := r.URL.Query().Get("service")
	if service == "" {
		writeError(w, http.StatusBadRequest, errors.New("service is required"))
		return
	}
	v, err := s.serviceView(r, service, since, until)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, v)
}

func (s *Server) serviceView(r *http.Request, service string, since, until time.Time) (*ServiceView, error) {
	ctx := r.Context()
	v := &ServiceView{Service: service, Series: map[string][]store.Point{}, Providers: []ProviderCount{}, Consumers: []ConsumerCount{}}
	for _, side := range []monitor.Side{monitor.Consumer, monitor.Provider} {
		pts, err := s.st.Series(ctx, service, side, since, until)
		if err != nil {
			return nil, err
		}
		v.Series[string(side)] = pts
	}
	byProvider, err := s.st.Query(ctx, store.Query{Since: since, Until: until, Service: service, By: store.ByProvider})
	if err != nil {
		return nil, err
	}
	v.Since, v.Until = byProvider.Since, byProvider.Until
	type hists struct{ consumer, provider store.Hist }
	provs := map[string]*ProviderCount{}
	lat := map[string]*hists{}
	for _, row := range byProvider.Rows {
		p := provs[row.Provider]
		if p == nil {
			p = &ProviderCount{Provider: row.Provider}
			provs[row.Provider] = p
			lat[row.Provider] = &hists{}
		}
		h := lat[row.Provider]
		if row.Side == string(monitor.Consumer) {
			p.ConsumerCalls += row.Calls
			p.ConsumerFailures += row.Failures
			h.consumer = h.consumer.Add(row.Latency)
		} else {
			p.ProviderCalls += row.Calls
			p.ProviderFailures += row.Failures
			h.provider = h.provider.Add(row.Latency)
		}
	}
	for addr, p := range provs {
		p.ConsumerP99Ms = float64(lat[addr].consumer.Quantile(99)) / 1e3
		p.ProviderP99Ms = float64(lat[addr].provider.Quantile(99)) / 1e3
		v.Providers = append(v.Providers, *p)
	}
	slices.SortFunc(v.Providers, func(a, b ProviderCount) int { return cmp.Compare(a.Provider, b.Provider) })
	flagSlow(v.Providers)

	byConsumer, err := s.st.Query(ctx, store.Query{Since: since, Until: until, Service: service, By: store.ByConsumer})
	if err != nil {
		return nil, err
	}
	cons := map[string]*ConsumerCount{}
	for _, row := range byConsumer.Rows {
		c := cons[row.Consumer]
		if c == nil {
			c = &ConsumerCount{Consumer: row.Consumer}
			cons[row.Consumer] = c
		}
		if row.Side == string(monitor.Consumer) {
			c.ConsumerCalls += row.Calls
		} else {
			c.ProviderCalls += row.Calls
		}
	}
	for _, c := range cons {
		v.Consumers = append(v.Consumers, *c)
	}
	slices.SortFunc(v.Consumers, func(a, b ConsumerCount) int { return cmp.Compare(a.Consumer, b.Consumer) })
	return v, nil
}

// flagSlow sets Slow on the providers whose p99 is far above their
// peers': over SlowFactor times the (lower) median of the others' p99 and
// at least SlowMargin above it.
func flagSlow(ps []ProviderCount) {
	p99 := func(p ProviderCount) float64 {
		if p.ConsumerCalls > 0 {
			return p.ConsumerP99Ms
		}
		return p.ProviderP99Ms
	}
	judged := func(p ProviderCount) bool { return max(p.ConsumerCalls, p.ProviderCalls) >= SlowMinCalls }
	for i := range ps {
		if !judged(ps[i]) {
			continue
		}
		var others []float64
		for j := range ps {
			if j != i && judged(ps[j]) {
				others = append(others, p99(ps[j]))
			}
		}
		if len(others) == 0 {
			continue
		}
		slices.Sort(others)
		median := others[(len(others)-1)/2]
		mine := p99(ps[i])
		ps[i].Slow = mine > SlowFactor*median && mine-median >= float64(SlowMargin.Microseconds())/1e3
	}
}
