package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/minidubbo/minidubbo/monitor"
)

func init() {
	sqlite.MustRegisterDeterministicScalarFunction("minidubbo_hist_add", 2, histAddSQL)
	sqlite.MustRegisterFunction("minidubbo_hist_merge", &sqlite.FunctionImpl{
		NArgs:         1,
		Deterministic: true,
		MakeAggregate: func(sqlite.FunctionContext) (sqlite.AggregateFunction, error) { return &histMerge{}, nil },
	})
}

func histArg(v driver.Value) (Hist, error) {
	switch b := v.(type) {
	case nil:
		return Hist{}, nil
	case []byte:
		return unmarshalHist(b)
	}
	return Hist{}, fmt.Errorf("%w: SQL value of type %T", errHist, v)
}

// histAddSQL is minidubbo_hist_add(a, b): the sum of two stored histograms.
func histAddSQL(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	a, err := histArg(args[0])
	if err != nil {
		return nil, err
	}
	b, err := histArg(args[1])
	if err != nil {
		return nil, err
	}
	return a.Add(b).marshal(), nil
}

// histMerge is the aggregate minidubbo_hist_merge(h): the sum of the
// histograms of a group.
type histMerge struct{ sum Hist }

func (m *histMerge) Step(_ *sqlite.FunctionContext, args []driver.Value) error {
	h, err := histArg(args[0])
	if err != nil {
		return err
	}
	m.sum = m.sum.Add(h)
	return nil
}

func (m *histMerge) WindowInverse(*sqlite.FunctionContext, []driver.Value) error {
	return fmt.Errorf("minidubbo_hist_merge is not a window function")
}

func (m *histMerge) WindowValue(*sqlite.FunctionContext) (driver.Value, error) {
	return m.sum.marshal(), nil
}

func (m *histMerge) Final(*sqlite.FunctionContext) {}

// Groupings of a Query: the key columns a row of the answer keeps.
const (
	ByKey      = ""         // side, application, service, method, provider, consumer
	ByMethod   = "method"   // side, application, service, method
	ByProvider = "provider" // side, application, service, provider
	ByConsumer = "consumer" // side, application, service, consumer
)

// Bys lists the groupings of Query.By.
var Bys = []string{ByProvider, ByConsumer, ByMethod}

// Query selects and groups the stored rows.
type Query struct {
	// Since and Until bound the rows by their minute: rows of the minutes
	// from Since's (included) to Until's (included). Until defaults to now,
	// Since to an hour before Until.
	Since, Until time.Time
	// Service, when set, keeps only that service (group/interface:version,
	// or the interface alone when it has neither).
	Service string
	// By groups the rows: ByKey (every key apart), ByMethod, ByProvider or
	// ByConsumer. On the consumer side the call-level rows (provider "")
	// and the per-provider attempt rows count different things, so
	// ByMethod and ByConsumer use the call-level rows only and ByProvider
	// the attempt rows only; on the provider side every row is used.
	By string
}

// Summary is the answer to a Query: the report people read, and the JSON
// of /api/report and `minidubbo report -format json`.
type Summary struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	Rows  []Row     `json:"rows"`
}

// Row is one line of a Summary.
type Row struct {
	Side        string `json:"side"`
	Application string `json:"application"`
	Service     string `json:"service"`
	Method      string `json:"method"`
	// Provider is host:port; on the consumer side "" marks the call-level
	// row (calls as the application made them, above the cluster).
	Provider string `json:"provider"`
	// Consumer is application@host of the calling process.
	Consumer       string           `json:"consumer"`
	Calls          int64            `json:"calls"`
	Successes      int64            `json:"successes"`
	Failures       int64            `json:"failures"`
	FailuresByKind map[string]int64 `json:"failures_by_kind"`
	// QPS is Calls over the time the reports of the row span (at least a
	// second).
	QPS      float64 `json:"qps"`
	AvgMs    float64 `json:"avg_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	BytesIn  int64   `json:"bytes_in"`
	BytesOut int64   `json:"bytes_out"`
	// Latency is the row's merged histogram (not in the JSON).
	Latency Hist `json:"-"`
}

// round3 keeps three decimals, so the JSON stays readable and a page that
// prints the numbers as they come shows the same digits.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func minuteFloor(t time.Time) int64 {
	u := t.Unix()
	return u - ((u%60)+60)%60
}

// window fills in Query's default bounds.
func (s *Store) window(since, until time.Time) (time.Time, time.Time, error) {
	if until.IsZero() {
		until = s.opts.Now()
	}
	if since.IsZero() {
		since = until.Add(-time.Hour)
	}
	if since.After(until) {
		return since, until, fmt.Errorf("store: since %v is after until %v", since, until)
	}
	return time.Unix(minuteFloor(since), 0).UTC(), until.UTC(), nil
}

// Query returns the rows of q, ordered by service, method, side,
// application, provider and consumer.
func (s *Store) Query(ctx context.Context, q Query) (*Summary, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	since, until, err := s.window(q.Since, q.Until)
	if err != nil {
		return nil, err
	}
	m, p, c, where := "method", "provider", "consumer", ""
	switch q.By {
	case ByKey:
	case ByMethod:
		p, c, where = "''", "''", "AND NOT (side = 'consumer' AND provider <> '')"
	case ByProvider:
		m, c, where = "''", "''", "AND NOT (side = 'consumer' AND provider = '')"
	case ByConsumer:
		m, p, where = "''", "''", "AND NOT (side = 'consumer' AND provider <> '')"
	default:
		return nil, fmt.Errorf("store: unknown grouping %q (known: %s)", q.By, strings.Join(Bys, ", "))
	}
	sums := make([]string, len(kindColumns))
	for i, k := range kindColumns {
		sums[i] = "sum(" + k + ")"
	}
	query := fmt.Sprintf(`SELECT side, application, service, %s AS m, %s AS p, %s AS c,
	sum(calls), sum(successes), sum(failures), %s, sum(bytes_in), sum(bytes_out),
	sum(elapsed_ns), max(max_ns), min(first_ns), max(last_ns), minidubbo_hist_merge(latency)
FROM calls
WHERE minute >= ? AND minute <= ? AND (? = '' OR service = ?) %s
GROUP BY side, application, service, m, p, c
ORDER BY service, m, side, application, p, c`, m, p, c, strings.Join(sums, ", "), where)
	rows, err := s.db.QueryContext(ctx, query, since.Unix(), minuteFloor(until), q.Service, q.Service)
	if err != nil {
		return nil, fmt.Errorf("store: query: %w", err)
	}
	defer rows.Close()
	out := &Summary{Since: since, Until: until, Rows: []Row{}}
	for rows.Next() {
		var r Row
		kinds := make([]int64, len(Kinds))
		var elapsed, maxNs, first, last int64
		var lat []byte
		dest := []any{&r.Side, &r.Application, &r.Service, &r.Method, &r.Provider, &r.Consumer,
			&r.Calls, &r.Successes, &r.Failures}
		for i := range kinds {
			dest = append(dest, &kinds[i])
		}
		dest = append(dest, &r.BytesIn, &r.BytesOut, &elapsed, &maxNs, &first, &last, &lat)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: query: %w", err)
		}
		r.FailuresByKind = map[string]int64{}
		for i, n := range kinds {
			if n != 0 {
				r.FailuresByKind[Kinds[i]] = n
			}
		}
		if r.Latency, err = unmarshalHist(lat); err != nil {
			return nil, fmt.Errorf("store: query: %w", err)
		}
		span := max(time.Duration(last-first), time.Second)
		r.QPS = round3(float64(r.Calls) / span.Seconds())
		if ended := r.Successes + r.Failures; ended > 0 {
			r.AvgMs = round3(float64(elapsed) / float64(ended) / 1e6)
		}
		r.P50Ms = round3(float64(r.Latency.Quantile(50)) / 1e3)
		r.P99Ms = round3(float64(r.Latency.Quantile(99)) / 1e3)
		r.MaxMs = round3(float64(maxNs) / 1e6)
		out.Rows = append(out.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: query: %w", err)
	}
	return out, nil
}

// Point is one minute of a service's history on one side.
type Point struct {
	Time     time.Time `json:"t"`
	Calls    int64     `json:"calls"`
	Failures int64     `json:"failures"`
	// QPS is Calls over the part of the minute the reports span.
	QPS         float64 `json:"qps"`
	FailureRate float64 `json:"failure_rate"`
	P99Ms       float64 `json:"p99_ms"`
}

// Series returns a service's history on one side, a point per minute that
// has rows, oldest first. On the consumer side it counts calls (the
// call-level rows), not attempts.
func (s *Store) Series(ctx context.Context, service string, side monitor.Side, since, until time.Time) ([]Point, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	since, until, err := s.window(since, until)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT minute, sum(calls), sum(failures), min(first_ns), max(last_ns),
	minidubbo_hist_merge(latency)
FROM calls
WHERE service = ? AND side = ? AND minute >= ? AND minute <= ? AND NOT (side = 'consumer' AND provider <> '')
GROUP BY minute ORDER BY minute`, service, string(side), since.Unix(), minuteFloor(until))
	if err != nil {
		return nil, fmt.Errorf("store: series: %w", err)
	}
	defer rows.Close()
	out := []Point{}
	for rows.Next() {
		var p Point
		var minute, first, last int64
		var lat []byte
		if err := rows.Scan(&minute, &p.Calls, &p.Failures, &first, &last, &lat); err != nil {
			return nil, fmt.Errorf("store: series: %w", err)
		}
		h, err := unmarshalHist(lat)
		if err != nil {
			return nil, fmt.Errorf("store: series: %w", err)
		}
		p.Time = time.Unix(minute, 0).UTC()
		span := min(max(time.Duration(last-first), time.Second), time.Minute)
		p.QPS = round3(float64(p.Calls) / span.Seconds())
		if p.Calls > 0 {
			p.FailureRate = round3(float64(p.Failures) / float64(p.Calls))
		}
		p.P99Ms = round3(float64(h.Quantile(99)) / 1e3)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: series: %w", err)
	}
	return out, nil
}

// Stats describes the reports received since a time.
type Stats struct {
	// Reports is the number of reports stored; Dropped the sum of what
	// their senders said they dropped unsent (buffer overflow).
	Reports int64 `json:"reports"`
	Dropped int64 `json:"dropped"`
	// Senders is the number of distinct application@host that reported.
	Senders int64 `json:"senders"`
	// Last is when the latest report was received (zero when none).
	Last time.Time `json:"last"`
}

// Stats returns what was received since the given time.
func (s *Store) Stats(ctx context.Context, since time.Time) (Stats, error) {
	if ctx == nil {
		return Stats{}, errNilContext
	}
	var st Stats
	var last int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(dropped), 0),
	count(DISTINCT application || '@' || host), coalesce(max(received_ns), 0)
FROM reports WHERE end_ns >= ?`, since.UnixNano()).Scan(&st.Reports, &st.Dropped, &st.Senders, &last)
	if err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if last != 0 {
		st.Last = time.Unix(0, last).UTC()
	}
	return st, nil
}
