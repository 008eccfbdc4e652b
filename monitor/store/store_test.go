package store

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/reporttest"
	"github.com/minidubbo/minidubbo/monitor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, dir string, c *clock) *Store {
	t.Helper()
	s, err := Open(dir, Options{Now: c.now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

const svc = "demo.Greeter"

// shop is a consumer's report: 100 calls, 3 failed (2 timeouts, 1 no
// provider), sent as 60 attempts to p1 and 41 to p2 (one retry).
func shop(seq uint64, start time.Time) *monitor.Report {
	return reporttest.Report("shop", "10.0.0.9", seq, start, 10*time.Second,
		reporttest.Row(monitor.Consumer, "shop", svc, "SayHello", "", "shop@10.0.0.9",
			reporttest.Latencies(100, time.Millisecond, 20*time.Millisecond),
			map[string]int64{monitor.KindTimeout: 2, monitor.KindNoProvider: 1}),
		reporttest.Row(monitor.Consumer, "shop", svc, "SayHello", "10.0.0.1:20880", "shop@10.0.0.9",
			reporttest.Latencies(60, time.Millisecond, 10*time.Millisecond), map[string]int64{monitor.KindTimeout: 2}),
		reporttest.Row(monitor.Consumer, "shop", svc, "SayHello", "10.0.0.2:20880", "shop@10.0.0.9",
			reporttest.Latencies(41, 2*time.Millisecond, 20*time.Millisecond), nil),
	)
}

func provider(addr string, seq uint64, start time.Time, n int, hi time.Duration) *monitor.Report {
	return reporttest.Report("hello-provider", addr, seq, start, 10*time.Second,
		reporttest.Row(monitor.Provider, "hello-provider", svc, "SayHello", addr, "shop@10.0.0.9",
			reporttest.Latencies(n, time.Millisecond, hi), nil))
}

func add(t *testing.T, s *Store, r *monitor.Report) Outcome {
	t.Helper()
	o, err := s.Add(testCtx(t), r)
	require.NoError(t, err)
	return o
}

func TestRoundTrip(t *testing.T) {
	c := &clock{t: t0.Add(time.Minute)}
	s := open(t, t.TempDir(), c)
	r := shop(1, t0.Add(5*time.Second))
	assert.Equal(t, Stored, add(t, s, r))

	sum, err := s.Query(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(-59*time.Minute), sum.Since, "an hour back, to the minute")
	assert.Equal(t, t0.Add(time.Minute), sum.Until)
	require.Len(t, sum.Rows, 3)
	for i, row := range sum.Rows {
		w := r.Rows[i]
		assert.Equal(t, string(w.Side), row.Side)
		assert.Equal(t, w.Provider, row.Provider, "ordered by provider, call-level row first")
		assert.Equal(t, "shop", row.Application)
		assert.Equal(t, svc, row.Service)
		assert.Equal(t, "SayHello", row.Method)
		assert.Equal(t, "shop@10.0.0.9", row.Consumer)
		assert.Equal(t, w.Calls, row.Calls)
		assert.Equal(t, w.Successes, row.Successes)
		assert.Equal(t, w.Failures, row.Failures)
		assert.Equal(t, w.BytesIn, row.BytesIn)
		assert.Equal(t, w.BytesOut, row.BytesOut)
		want := map[string]int64{}
		for k, n := range w.FailuresByKind {
			want[k] = n
		}
		assert.Equal(t, want, row.FailuresByKind)
		h, err := w.Latency.Decode()
		require.NoError(t, err)
		assert.Equal(t, round3(float64(h.ValueAtQuantile(50))/1e3), row.P50Ms)
		assert.Equal(t, round3(float64(h.ValueAtQuantile(99))/1e3), row.P99Ms)
		assert.Equal(t, round3(float64(w.ElapsedNanos)/float64(w.Calls)/1e6), row.AvgMs)
		assert.Equal(t, round3(float64(w.MaxNanos)/1e6), row.MaxMs)
		assert.Equal(t, round3(float64(w.Calls)/10), row.QPS, "calls over the 10 s the report spans")
	}
	assert.Equal(t, 20.0, sum.Rows[0].MaxMs)
	assert.InDelta(t, 19.8, sum.Rows[0].P99Ms, 0.05)

	st, err := s.Stats(testCtx(t), t0.Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, Stats{Reports: 1, Senders: 1, Last: t0.Add(time.Minute)}, st)
}

func TestMergesAMinuteAndSeries(t *testing.T) {
	c := &clock{t: t0.Add(3 * time.Minute)}
	s := open(t, t.TempDir(), c)
	// Six 10-second reports of one provider in the first minute, one in
	// the second (its middle falls in it), none in the third.
	for i := range 6 {
		add(t, s, provider("10.0.0.1:20880", uint64(i+1), t0.Add(time.Duration(i)*10*time.Second), 100, 5*time.Millisecond))
	}
	slow := provider("10.0.0.1:20880", 7, t0.Add(time.Minute), 50, 50*time.Millisecond)
	slow.Rows[0].FailuresByKind = map[string]int64{monitor.KindBusiness: 5}
	slow.Rows[0].Failures, slow.Rows[0].Successes = 5, 45
	add(t, s, slow)

	sum, err := s.Query(testCtx(t), Query{Since: t0, Service: svc})
	require.NoError(t, err)
	require.Len(t, sum.Rows, 1)
	row := sum.Rows[0]
	assert.EqualValues(t, 650, row.Calls)
	assert.EqualValues(t, 5, row.Failures)
	assert.Equal(t, map[string]int64{monitor.KindBusiness: 5}, row.FailuresByKind)
	assert.Equal(t, 50.0, row.MaxMs)
	assert.Equal(t, round3(650.0/70), row.QPS, "650 calls over the 70 s the reports span")
	assert.EqualValues(t, 650, row.Latency.Total(), "histograms merged")

	pts, err := s.Series(testCtx(t), svc, monitor.Provider, t0, time.Time{})
	require.NoError(t, err)
	require.Len(t, pts, 2)
	assert.Equal(t, Point{Time: t0, Calls: 600, QPS: 10, P99Ms: pts[0].P99Ms}, pts[0])
	assert.InDelta(t, 4.95, pts[0].P99Ms, 0.01)
	assert.Equal(t, Point{Time: t0.Add(time.Minute), Calls: 50, Failures: 5, QPS: 5, FailureRate: 0.1, P99Ms: pts[1].P99Ms}, pts[1])
	assert.InDelta(t, 50, pts[1].P99Ms, 0.1)

	none, err := s.Series(testCtx(t), svc, monitor.Consumer, t0, time.Time{})
	require.NoError(t, err)
	assert.Empty(t, none)
	other, err := s.Query(testCtx(t), Query{Since: t0, Service: "no.Such"})
	require.NoError(t, err)
	assert.Empty(t, other.Rows)
	assert.NotNil(t, other.Rows, "an empty list, not null, in JSON")
}

func TestDuplicateStoredOnce(t *testing.T) {
	c := &clock{t: t0.Add(time.Minute)}
	s := open(t, t.TempDir(), c)
	r := shop(1, t0)
	assert.Equal(t, Stored, add(t, s, r))
	assert.Equal(t, Duplicate, add(t, s, r))
	assert.Equal(t, Duplicate, add(t, s, shop(1, t0)), "same sender, seq and start")
	// A restarted process numbers its reports from 1 again: a new start.
	assert.Equal(t, Stored, add(t, s, shop(1, t0.Add(20*time.Second))))

	sum, err := s.Query(testCtx(t), Query{By: ByMethod})
	require.NoError(t, err)
	require.Len(t, sum.Rows, 1)
	assert.EqualValues(t, 200, sum.Rows[0].Calls)
	st, err := s.Stats(testCtx(t), t0.Add(-time.Hour))
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Reports)
}

func TestRestartKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0.Add(time.Minute)}
	s, err := Open(dir, Options{Now: c.now})
	require.NoError(t, err)
	add(t, s, shop(1, t0))
	add(t, s, provider("10.0.0.1:20880", 1, t0, 60, 10*time.Millisecond))
	before, err := s.Query(testCtx(t), Query{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = open(t, dir, c)
	after, err := s.Query(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Equal(t, Duplicate, add(t, s, shop(1, t0)), "de-duplication survives the restart too")

	ro, err := Open(dir, Options{Now: c.now, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	fromRO, err := ro.Query(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Equal(t, before, fromRO)
	_, err = ro.Add(testCtx(t), shop(2, t0))
	assert.ErrorContains(t, err, "read-only")

	_, err = Open(t.TempDir(), Options{ReadOnly: true})
	assert.ErrorContains(t, err, "no monitor data in")
}

func TestRetention(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0.Add(time.Minute)}
	s, err := Open(dir, Options{Now: c.now, Retention: 24 * time.Hour})
	require.NoError(t, err)
	add(t, s, shop(1, t0))
	add(t, s, shop(2, t0.Add(12*time.Hour)))

	c.set(t0.Add(24*time.Hour + 2*time.Minute))
	n, err := s.Prune(testCtx(t))
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "the three rows of the first report's minute")
	sum, err := s.Query(testCtx(t), Query{Since: t0.Add(-time.Hour), By: ByMethod})
	require.NoError(t, err)
	require.Len(t, sum.Rows, 1)
	assert.EqualValues(t, 100, sum.Rows[0].Calls, "only the report of 12 hours later is left")
	assert.Equal(t, Expired, add(t, s, shop(3, t0)), "a report older than the retention is not stored")
	st, err := s.Stats(testCtx(t), time.Time{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Reports)
	require.NoError(t, s.Close())

	// Opening prunes too.
	c.set(t0.Add(48 * time.Hour))
	s2, err := Open(dir, Options{Now: c.now, Retention: 24 * time.Hour})
	require.NoError(t, err)
	defer s2.Close()
	sum, err = s2.Query(testCtx(t), Query{Since: t0.Add(-time.Hour)})
	require.NoError(t, err)
	assert.Empty(t, sum.Rows)

	_, err = Open(dir, Options{Retention: -time.Hour})
	assert.ErrorContains(t, err, "negative")
}

func TestGroupings(t *testing.T) {
	c := &clock{t: t0.Add(time.Minute)}
	s := open(t, t.TempDir(), c)
	add(t, s, shop(1, t0))
	add(t, s, provider("10.0.0.1:20880", 1, t0, 58, 10*time.Millisecond))
	add(t, s, provider("10.0.0.2:20880", 1, t0, 41, 10*time.Millisecond))
	second := provider("10.0.0.2:20880", 2, t0.Add(10*time.Second), 7, 10*time.Millisecond)
	second.Rows[0].Method = "SayBye"
	add(t, s, second)

	type line struct {
		side, method, provider, consumer string
		calls                            int64
	}
	lines := func(by string) []line {
		sum, err := s.Query(testCtx(t), Query{By: by})
		require.NoError(t, err)
		var out []line
		for _, r := range sum.Rows {
			out = append(out, line{r.Side, r.Method, r.Provider, r.Consumer, r.Calls})
		}
		return out
	}
	assert.Equal(t, []line{
		{"provider", "SayBye", "", "", 7},
		{"consumer", "SayHello", "", "", 100},
		{"provider", "SayHello", "", "", 99},
	}, lines(ByMethod))
	assert.Equal(t, []line{
		{"consumer", "", "10.0.0.1:20880", "", 60},
		{"consumer", "", "10.0.0.2:20880", "", 41},
		{"provider", "", "10.0.0.1:20880", "", 58},
		{"provider", "", "10.0.0.2:20880", "", 48},
	}, lines(ByProvider))
	assert.Equal(t, []line{
		{"consumer", "", "", "shop@10.0.0.9", 100},
		{"provider", "", "", "shop@10.0.0.9", 106},
	}, lines(ByConsumer))
	assert.Len(t, lines(ByKey), 6)

	_, err := s.Query(testCtx(t), Query{By: "host"})
	assert.ErrorContains(t, err, `unknown grouping "host" (known: provider, consumer, method)`)
	_, err = s.Query(testCtx(t), Query{Since: t0.Add(time.Hour), Until: t0})
	assert.ErrorContains(t, err, "is after")
}

func TestRefusesBadReports(t *testing.T) {
	c := &clock{t: t0.Add(time.Minute)}
	s := open(t, t.TempDir(), c)
	for _, tc := range []struct {
		name, want string
		change     func(r *monitor.Report)
	}{
		{"no application", "no application name", func(r *monitor.Report) { r.Application = "" }},
		{"seq 0", "seq 0", func(r *monitor.Report) { r.Seq = 0 }},
		{"backwards", "does not end after it starts", func(r *monitor.Report) { r.End = r.Start.Add(-time.Second) }},
		{"side", `unknown side "both" (known: consumer, provider)`, func(r *monitor.Report) { r.Rows[1].Side = "both" }},
		{"kind", `row 0: unknown failure kind "oops" (known: business, timeout, no_provider, connection, busy, other)`,
			func(r *monitor.Report) { r.Rows[0].FailuresByKind["oops"] = 1 }},
		{"negative", "row 2: calls -1 is out of range", func(r *monitor.Report) { r.Rows[2].Calls = -1 }},
		{"huge", "row 1: bytes_in 9223372036854775807 is out of range", func(r *monitor.Report) { r.Rows[1].BytesIn = math.MaxInt64 }},
		{"huge bucket", "row 0: malformed latency histogram", func(r *monitor.Report) { r.Rows[0].Latency.Count[0] = 1 << 41 }},
		{"histogram", "row 0: malformed latency histogram", func(r *monitor.Report) { r.Rows[0].Latency.Index[0] = 1 << 30 }},
		{"histogram lengths", "1 indexes, 0 counts", func(r *monitor.Report) {
			r.Rows[0].Latency = monitor.Histogram{Index: []int32{1}}
		}},
		{"long name", "service is 2000 bytes", func(r *monitor.Report) { r.Rows[0].Service = strings.Repeat("x", 2000) }},
		{"no method", "service and method are required", func(r *monitor.Report) { r.Rows[0].Method = "" }},
		{"too many rows", "10001 rows, more than 10000", func(r *monitor.Report) {
			r.Rows = make([]monitor.Row, MaxRows+1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := shop(1, t0)
			tc.change(r)
			_, err := s.Add(testCtx(t), r)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err := s.Add(testCtx(t), nil)
	assert.ErrorContains(t, err, "nil report")
	sum, err := s.Query(testCtx(t), Query{})
	require.NoError(t, err)
	assert.Empty(t, sum.Rows, "nothing of a refused report is stored")
	assert.Equal(t, Stored, add(t, s, shop(1, t0)), "and it may come again, corrected")
}

func TestHistMatchesHdrHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := monitor.NewHistogram()
	parts := make([]Hist, 4)
	for p := range parts {
		part := monitor.NewHistogram()
		for range 5000 {
			v := int64(rng.ExpFloat64()*2000) + 1
			require.NoError(t, h.RecordValue(v))
			require.NoError(t, part.RecordValue(v))
		}
		var err error
		parts[p], err = HistFromWire(monitor.EncodeHistogram(part))
		require.NoError(t, err)
	}
	sum := parts[0].Add(parts[1]).Add(parts[2].Add(parts[3]))
	assert.Equal(t, h.TotalCount(), sum.Total())
	for _, q := range []float64{0.1, 1, 25, 50, 90, 99, 99.9, 100} {
		assert.Equal(t, h.ValueAtQuantile(q), sum.Quantile(q), "q=%v", q)
	}
	back, err := unmarshalHist(sum.marshal())
	require.NoError(t, err)
	assert.Equal(t, sum, back)
	assert.Zero(t, Hist{}.Quantile(50))

	// The wire form may come unsorted and with repeats.
	w := monitor.Histogram{Index: []int32{900, 5, 900, 7}, Count: []int64{1, 2, 3, 0}}
	got, err := HistFromWire(w)
	require.NoError(t, err)
	assert.Equal(t, Hist{Index: []int32{5, 900}, Count: []int64{2, 4}}, got)

	bounds := []int64{1, 1000, 1 << 40}
	counts := sum.CountAtOrBelow(bounds)
	assert.EqualValues(t, sum.Total(), counts[2])
	assert.Less(t, counts[1], counts[2])

	for _, bad := range [][]byte{{5}, {1, 0}, {2, 3, 1, 0, 1}, {1, 200, 200, 200, 200, 1, 1}, {1, 3, 1, 9}} {
		_, err := unmarshalHist(bad)
		assert.Error(t, err, "%v", bad)
	}
}

// FuzzHistFromWire feeds arbitrary wire histograms (as a report from the
// network may carry) through the checks, the encoding and the merge.
func FuzzHistFromWire(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w monitor.Histogram
		for len(b) >= 5 {
			w.Index = append(w.Index, int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24))
			w.Count = append(w.Count, int64(int8(b[4])))
			b = b[5:]
		}
		if len(b) > 0 {
			w.Count = append(w.Count, 1) // lengths that differ
		}
		h, err := HistFromWire(w)
		if err != nil {
			return
		}
		for k := range h.Index {
			if h.Count[k] <= 0 || (k > 0 && h.Index[k] <= h.Index[k-1]) {
				t.Fatalf("not sorted and positive: %+v", h)
			}
		}
		back, err := unmarshalHist(h.marshal())
		if err != nil {
			t.Fatal(err)
		}
		if h.Total() != back.Total() || len(h.Index) != len(back.Index) {
			t.Fatalf("round trip: %+v != %+v", h, back)
		}
		if h.Add(h).Total() != 2*h.Total() {
			t.Fatal("sum")
		}
		_ = h.Quantile(99)
	})
}

// Every method that takes a context says a nil one is an error; the SQL
// driver panicked on it.
func TestNilContextIsAnError(t *testing.T) {
	s := open(t, t.TempDir(), &clock{t: t0})
	var nilCtx context.Context // as a caller that forgot to set one
	const want = "store: nil context.Context: pass context.Background()"
	_, err := s.Add(nilCtx, shop(1, t0))
	require.EqualError(t, err, want)
	_, err = s.Query(nilCtx, Query{})
	require.EqualError(t, err, want)
	_, err = s.Series(nilCtx, svc, monitor.Consumer, t0, t0)
	require.EqualError(t, err, want)
	_, err = s.Stats(nilCtx, t0)
	require.EqualError(t, err, want)
	_, err = s.Prune(nilCtx)
	require.EqualError(t, err, want)
	require.Equal(t, Stored, add(t, s, shop(1, t0)), "still works")
}
