package monitor

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		side Side
		err  error
		want string
	}{
		{Consumer, &service.Error{Code: 1, Message: "no", Remote: true}, KindBusiness},
		{Consumer, fmt.Errorf("call: %w", status.ErrTimeout), KindTimeout},
		{Consumer, context.DeadlineExceeded, KindTimeout},
		{Consumer, &status.Error{Code: status.ServerTimeout}, KindTimeout},
		{Consumer, &status.Error{Code: status.ServerBusy}, KindBusy},
		{Consumer, fmt.Errorf("%w: refused", status.ErrDial), KindConnection},
		{Consumer, status.ErrConnLost, KindConnection},
		{Consumer, status.ErrClosed, KindConnection},
		{Consumer, status.ErrReadOnly, KindConnection},
		{Consumer, context.Canceled, KindOther},
		{Consumer, errBoom, KindOther},
		{Provider, errBoom, KindBusiness},
		{Provider, fmt.Errorf("%w: executes", status.ErrServerBusy), KindBusy},
		{Provider, context.Canceled, KindOther},
		{Provider, fmt.Errorf("%w: no method", status.ErrServiceNotFound), KindOther},
	} {
		assert.Equal(t, c.want, Classify(c.side, c.err), "%s %v", c.side, c.err)
	}
}

// TestPeersAndKinds counts the three filters with their peers, bytes and
// failure kinds, and checks Snapshot and TakeReport agree.
func TestPeersAndKinds(t *testing.T) {
	ctx := testCtx(t)
	m := New(WithIdentity("shop", "10.0.0.1"), WithClassifier(func(side Side, err error) string {
		if err == errNoProvider {
			return KindNoProvider
		}
		return Classify(side, err)
	}))
	call := m.CallFilter()
	a1, a2 := m.AttemptFilter("10.0.0.2:20880"), m.AttemptFilter("10.0.0.3:20880")
	rec := m.ProviderRecorder()
	rec.SetAddr("10.0.0.1:20880")
	prov := filter.NewCount(rec)
	inv := &protocol.Invocation{Service: "s", Method: "m"}
	withBytes := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		return &protocol.Result{RequestBytes: 10, ResponseBytes: 100}, nil
	}}
	for range 3 {
		_, err := call.Invoke(ctx, inv, withBytes)
		require.NoError(t, err)
		_, err = a1.Invoke(ctx, inv, withBytes)
		require.NoError(t, err)
	}
	_, _ = a2.Invoke(ctx, inv, answer(fmt.Errorf("x: %w", status.ErrTimeout)))
	_, _ = call.Invoke(ctx, inv, answer(errNoProvider))

	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 40000}
	pinv := &protocol.Invocation{Service: "s", Method: "m", RemoteAddr: remote, RequestBytes: 7,
		Attachments: map[string]string{protocol.KeyRemoteApplication: "web"}}
	_, err := prov.Invoke(ctx, pinv, answer(nil))
	require.NoError(t, err)
	prov.ResponseSent(pinv, 70)
	_, _ = prov.Invoke(ctx, pinv, answer(errBoom))

	type row struct {
		side               Side
		provider, consumer string
		calls, ok          int64
		kinds              map[string]int64
		in, out            int64
	}
	var got []row
	for _, s := range m.Snapshot() {
		got = append(got, row{s.Side, s.Provider, s.Consumer, s.Calls, s.Successes, s.FailuresByKind, s.BytesIn, s.BytesOut})
	}
	want := []row{
		{Consumer, "", "shop@10.0.0.1", 4, 3, map[string]int64{KindNoProvider: 1}, 300, 30},
		{Consumer, "10.0.0.2:20880", "shop@10.0.0.1", 3, 3, nil, 300, 30},
		{Consumer, "10.0.0.3:20880", "shop@10.0.0.1", 1, 0, map[string]int64{KindTimeout: 1}, 0, 0},
		{Provider, "10.0.0.1:20880", "web@10.0.0.9", 2, 1, map[string]int64{KindBusiness: 1}, 14, 70},
	}
	assert.Equal(t, want, got)

	r := m.TakeReport()
	assert.Equal(t, "shop", r.Application)
	assert.Equal(t, "10.0.0.1", r.Host)
	var fromReport []row
	for _, w := range r.Rows {
		fromReport = append(fromReport, row{w.Side, w.Provider, w.Consumer, w.Calls, w.Successes, w.FailuresByKind, w.BytesIn, w.BytesOut})
		h, err := w.Latency.Decode()
		require.NoError(t, err)
		assert.Equal(t, w.Successes+w.Failures, h.TotalCount(), "one latency sample per ended call")
		assert.Equal(t, "shop", w.Application)
	}
	assert.Equal(t, want, fromReport)
	assert.Empty(t, m.TakeReport().Rows, "nothing is reported twice")
	assert.Len(t, m.Snapshot(), 4, "snapshots stay cumulative")
}

var errNoProvider = fmt.Errorf("no provider")

// TestReportDeltasUnderLoad takes reports while calls go on: the reports
// add up to the calls made, each exactly once.
func TestReportDeltasUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	f := m.AttemptFilter("p:1")
	const goroutines, calls = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				var err error
				if (g+i)%7 == 0 {
					err = errBoom
				}
				_, _ = f.Invoke(ctx, &protocol.Invocation{Service: "s", Method: "m"}, answer(err))
			}
		})
	}
	var total, ok, failed, samples int64
	add := func(r *Report) {
		for _, w := range r.Rows {
			total += w.Calls
			ok += w.Successes
			failed += w.Failures
			h, err := w.Latency.Decode()
			require.NoError(t, err)
			samples += h.TotalCount()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			add(m.TakeReport())
		}
	}
	add(m.TakeReport())
	assert.EqualValues(t, goroutines*calls, total)
	assert.EqualValues(t, goroutines*calls, ok+failed)
	assert.EqualValues(t, goroutines*calls, samples)
	var wantFailed int64
	for g := range goroutines {
		for i := range calls {
			if (g+i)%7 == 0 {
				wantFailed++
			}
		}
	}
	assert.Equal(t, wantFailed, failed)
}

func TestMaxRestartsEachReport(t *testing.T) {
	ctx := testCtx(t)
	m := New()
	clock := &fakeClock{t: time.Unix(0, 0)}
	m.now = clock.nanos
	f := m.CallFilter()
	inv := &protocol.Invocation{Service: "s", Method: "m"}
	clock.step = 9 * time.Millisecond
	_, _ = f.Invoke(ctx, inv, answer(nil))
	r := m.TakeReport()
	assert.EqualValues(t, 9*time.Millisecond, r.Rows[0].MaxNanos)
	clock.step = 2 * time.Millisecond
	_, _ = f.Invoke(ctx, inv, answer(nil))
	r = m.TakeReport()
	assert.EqualValues(t, 2*time.Millisecond, r.Rows[0].MaxNanos, "the max restarts every interval")
	h, err := r.Rows[0].Latency.Decode()
	require.NoError(t, err)
	assert.EqualValues(t, 1, h.TotalCount())
	assert.InDelta(t, 2000, h.ValueAtQuantile(50), 2)
	assert.Equal(t, 9*time.Millisecond, m.Snapshot()[0].MaxElapsed, "Snapshot keeps the all-time max")
}

func TestNoAllocsPerCallAllFilters(t *testing.T) {
	ctx := testCtx(t)
	m := New(WithIdentity("app", "127.0.0.1"))
	res := &protocol.Result{RequestBytes: 1, ResponseBytes: 2}
	var next, fail protocol.Invoker
	next = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return res, nil }}
	fail = protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) { return nil, status.ErrTimeout }}
	rec := m.ProviderRecorder()
	rec.SetAddr("127.0.0.1:20880")
	prov := filter.NewCount(rec)
	inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello",
		RemoteAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, RequestBytes: 3,
		Attachments: map[string]string{protocol.KeyRemoteApplication: "web"}}
	for name, f := range map[string]protocol.Filter{"call": m.CallFilter(), "attempt": m.AttemptFilter("127.0.0.1:20880"), "provider": prov} {
		_, _ = f.Invoke(ctx, inv, next) // first call adds the entry
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = f.Invoke(ctx, inv, next) }), name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = f.Invoke(ctx, inv, fail) }), name+" failing")
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { prov.ResponseSent(inv, 10) }))
}

// TestReportKeepsAnEndCountedLate: a report taken while a call's end is
// half counted (its success in an earlier report, its time and histogram
// sample not yet) leaves those to the next report, which must carry them
// even though they are all that row has.
func TestReportKeepsAnEndCountedLate(t *testing.T) {
	m := New()
	c := m.counters(key{side: Consumer, service: "s", method: "m", provider: "p:1"})
	c.elapsed.Add(int64(5 * time.Millisecond))
	storeMax(&c.maxElapsed, int64(5*time.Millisecond))
	c.hist.record(5000)
	r := m.TakeReport()
	require.Len(t, r.Rows, 1)
	row := r.Rows[0]
	assert.Zero(t, row.Calls)
	assert.EqualValues(t, 5*time.Millisecond, row.ElapsedNanos)
	h, err := row.Latency.Decode()
	require.NoError(t, err)
	assert.EqualValues(t, 1, h.TotalCount())
	assert.Empty(t, m.TakeReport().Rows, "nothing is reported twice")
}
