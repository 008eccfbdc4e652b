package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// fakeCollector accepts reports while up and refuses them while down.
type fakeCollector struct {
	mu      sync.Mutex
	down    bool
	refuse  map[uint64]bool // seqs refused for good
	reports []*Report
	tries   int
}

var errDown = errors.New("monitor down")

func (c *fakeCollector) Collect(_ context.Context, r *Report) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tries++
	if c.down {
		return errDown
	}
	if c.refuse[r.Seq] {
		return Refused(fmt.Errorf("report %d is invalid", r.Seq))
	}
	cp := *r
	c.reports = append(c.reports, &cp)
	return nil
}

func (c *fakeCollector) setDown(d bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = d
}

func (c *fakeCollector) got() []*Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Report(nil), c.reports...)
}

func callN(t *testing.T, f protocol.Filter, n int) {
	ctx := testCtx(t)
	for range n {
		_, err := f.Invoke(ctx, &protocol.Invocation{Service: "s", Method: "m"}, answer(nil))
		require.NoError(t, err)
	}
}

func totalCalls(reports []*Report) (n int64) {
	for _, r := range reports {
		for _, w := range r.Rows {
			n += w.Calls
		}
	}
	return n
}

func seqs(reports []*Report) []uint64 {
	var s []uint64
	for _, r := range reports {
		s = append(s, r.Seq)
	}
	return s
}

func newTestReporter(t *testing.T, m *Monitor, c *fakeCollector, o ReporterOptions) *Reporter {
	o.Send = c.Collect
	if o.Interval == 0 {
		o.Interval = time.Hour // reports only when flushed
	}
	r, err := NewReporter(m, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// A monitor that is down for a while loses nothing that fits the buffer:
// the reports wait, then go in order, and add up to the calls made.
func TestReporterMonitorAwayThenBack(t *testing.T) {
	ctx := testCtx(t)
	m := New(WithIdentity("app", "127.0.0.1"))
	c := &fakeCollector{}
	r := newTestReporter(t, m, c, ReporterOptions{})
	f := m.CallFilter()

	callN(t, f, 3)
	require.NoError(t, r.Flush(ctx))
	c.setDown(true)
	for i := range 4 {
		callN(t, f, 10+i)
		require.ErrorIs(t, r.Flush(ctx), errDown)
	}
	st := r.Stats()
	assert.Equal(t, 4, st.Pending)
	assert.Positive(t, st.PendingBytes)
	assert.Zero(t, st.Dropped)
	c.setDown(false)
	callN(t, f, 5)
	require.NoError(t, r.Flush(ctx))

	got := c.got()
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, seqs(got), "in order, each once")
	assert.EqualValues(t, 3+10+11+12+13+5, totalCalls(got))
	for i, rep := range got {
		assert.Zero(t, rep.Dropped)
		assert.Equal(t, "app", rep.Application)
		if i > 0 {
			assert.Equal(t, got[i-1].End, rep.Start, "intervals follow each other")
		}
	}
	st = r.Stats()
	assert.Equal(t, ReporterStats{Taken: 6, Sent: 6, Failures: 4}, st)
}

// On overflow the oldest reports are dropped and counted, and the next
// report the monitor accepts says how many.
func TestReporterOverflowDropsOldest(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	c := &fakeCollector{}
	r := newTestReporter(t, m, c, ReporterOptions{BufferReports: 3})
	f := m.CallFilter()
	c.setDown(true)
	for i := 1; i <= 5; i++ {
		callN(t, f, i) // report i holds i calls
		require.Error(t, r.Flush(ctx))
	}
	assert.Equal(t, uint64(2), r.Stats().Dropped)
	c.setDown(false)
	require.NoError(t, r.Flush(ctx)) // report 6 (empty) pushes report 3 out

	got := c.got()
	assert.Equal(t, []uint64{4, 5, 6}, seqs(got))
	assert.Equal(t, []int64{3, 0, 0}, []int64{got[0].Dropped, got[1].Dropped, got[2].Dropped})
	assert.EqualValues(t, 4+5, totalCalls(got), "the dropped reports' calls are gone, the rest arrive")
	st := r.Stats()
	assert.Equal(t, uint64(3), st.Dropped)
	assert.Zero(t, st.Pending)

	// A later drop is reported again, once.
	c.setDown(true)
	for range 4 {
		callN(t, f, 1)
		require.Error(t, r.Flush(ctx))
	}
	c.setDown(false)
	require.NoError(t, r.Flush(ctx))
	got = c.got()[3:]
	assert.Equal(t, []uint64{9, 10, 11}, seqs(got))
	assert.EqualValues(t, 2, got[0].Dropped)
	assert.Zero(t, got[1].Dropped+got[2].Dropped)
}

func TestReporterBufferBytes(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	c := &fakeCollector{}
	// Room for about two one-row reports.
	one := New()
	callN(t, one.CallFilter(), 1)
	rep := one.TakeReport()
	b, err := (&Reporter{}).sizeOf(rep)
	require.NoError(t, err)
	r := newTestReporter(t, m, c, ReporterOptions{BufferBytes: 2*b + b/2})
	c.setDown(true)
	for range 5 {
		callN(t, m.CallFilter(), 1)
		require.Error(t, r.Flush(ctx))
	}
	st := r.Stats()
	assert.Equal(t, 2, st.Pending)
	assert.Equal(t, uint64(3), st.Dropped)
	assert.LessOrEqual(t, st.PendingBytes, 2*b+b/2)
}

// The ticker reports by itself, and Close sends the last partial interval.
func TestReporterIntervalAndClose(t *testing.T) {
	m := New()
	c := &fakeCollector{}
	r, err := NewReporter(m, ReporterOptions{Send: c.Collect, Interval: MinInterval})
	require.NoError(t, err)
	f := m.CallFilter()
	callN(t, f, 7)
	require.Eventually(t, func() bool { return totalCalls(c.got()) == 7 }, 10*time.Second, 10*time.Millisecond)
	callN(t, f, 2)
	require.NoError(t, r.Close(testCtx(t)))
	assert.EqualValues(t, 9, totalCalls(c.got()), "the last partial interval is sent at Close")
	require.NoError(t, r.Close(testCtx(t)), "Close is idempotent")
	require.Error(t, r.Flush(testCtx(t)))
}

func TestReporterCloseWithMonitorDown(t *testing.T) {
	m := New()
	c := &fakeCollector{down: true}
	r, err := NewReporter(m, ReporterOptions{Send: c.Collect})
	require.NoError(t, err)
	callN(t, m.CallFilter(), 1)
	err = r.Close(testCtx(t))
	require.ErrorIs(t, err, errDown)
	assert.Contains(t, err.Error(), "1 reports left unsent")
}

func TestReporterOptions(t *testing.T) {
	m := New()
	_, err := NewReporter(m, ReporterOptions{})
	require.Error(t, err)
	_, err = NewReporter(m, ReporterOptions{Send: (&fakeCollector{}).Collect, Interval: 10 * time.Millisecond})
	require.ErrorContains(t, err, "below the minimum 1s")
}

// A report the monitor refuses for good is dropped, counted and logged
// once, and the next ones go; one that fails otherwise (the monitor down)
// is kept and sent again, in order, as before. Before, a refused report
// was sent again first at every flush and held up every later one.
func TestReporterDropsRefusedReport(t *testing.T) {
	ctx := testCtx(t)
	m := New(WithIdentity("app", "127.0.0.1"))
	c := &fakeCollector{refuse: map[uint64]bool{2: true, 4: true}}
	core, logs := observer.New(zap.WarnLevel)
	r := newTestReporter(t, m, c, ReporterOptions{Logger: zap.New(core)})
	f := m.CallFilter()

	callN(t, f, 1)
	require.NoError(t, r.Flush(ctx)) // 1 sent
	callN(t, f, 2)
	require.NoError(t, r.Flush(ctx), "2 refused, dropped") // 2 refused
	callN(t, f, 3)
	require.NoError(t, r.Flush(ctx)) // 3 sent
	assert.Equal(t, []uint64{1, 3}, seqs(c.got()))

	c.setDown(true)
	callN(t, f, 4)
	require.ErrorIs(t, r.Flush(ctx), errDown) // 4 waits
	callN(t, f, 5)
	require.ErrorIs(t, r.Flush(ctx), errDown) // 4, 5 wait
	assert.Equal(t, 2, r.Stats().Pending, "kept while the monitor is down")
	c.setDown(false)
	callN(t, f, 6)
	require.NoError(t, r.Flush(ctx)) // 4 refused; 5 and 6 sent

	got := c.got()
	assert.Equal(t, []uint64{1, 3, 5, 6}, seqs(got))
	assert.EqualValues(t, 1+3+5+6, totalCalls(got), "only the refused reports' calls are missing")
	for _, rep := range got {
		assert.Zero(t, rep.Dropped, "a refused report is not a buffer drop")
	}
	assert.Equal(t, ReporterStats{Taken: 6, Sent: 4, Refused: 2, Failures: 4}, r.Stats())

	var refused []uint64
	for _, e := range logs.All() {
		if e.Message == "monitor refused a report; dropped it" {
			refused = append(refused, e.ContextMap()["seq"].(uint64))
			assert.Contains(t, e.ContextMap()["error"], "invalid")
		}
	}
	assert.Equal(t, []uint64{2, 4}, refused, "each refusal logged once, at WARN")

	// The code on the wire is a business error's.
	var se *service.Error
	require.ErrorAs(t, Refused(errors.New("x")), &se)
	assert.Equal(t, service.CodeInvalidArgument, se.Code)
	assert.True(t, IsRefused(fmt.Errorf("wrapped: %w", &service.Error{Code: CodeRefused, Message: "x", Remote: true})))
	assert.False(t, IsRefused(&service.Error{Code: service.CodeUnknown, Message: "x"}))
	assert.False(t, IsRefused(errDown))
	assert.NoError(t, Refused(nil))
}
