package server

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
)

// A report the monitor refuses (here its host is over store.MaxFieldLen)
// is dropped and counted by the reporter, and the later reports are
// stored: over real TCP, the monitor service exported with the dubbo
// protocol and called through the CollectorClient stub. Before, the
// reporter sent the refused report again at every flush, first, and no
// later report got through until it fell out of the buffer.
func TestRefusedReportDoesNotHoldUpTheLater(t *testing.T) {
	ctx := testCtx(t)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	srv, err := New(st, Options{})
	require.NoError(t, err)

	p, err := dubbo.New(nil)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	// Calls get 30 s, not the default 1 s: at load a store's write under
	// -race can take longer, and this test is about the answer, not time.
	u := protocol.NewURL(dubbo.Name, "127.0.0.1", 0, monitor.ServiceName, map[string]string{"timeout": "30000"})
	prov, err := proxy.NewProvider(u, srv.Collector())
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, exp.(*dubbo.Exporter).URL().Timeout())
	inv, err := p.Refer(exp.(*dubbo.Exporter).URL())
	require.NoError(t, err)
	var c monitor.CollectorClient
	require.NoError(t, proxy.Refer(&c, inv))

	// What the service answers for an invalid report, on the wire.
	bad := &monitor.Report{Application: "app", Seq: 1, Start: time.Now().Add(-time.Minute), End: time.Now(),
		Host: strings.Repeat("h", store.MaxFieldLen+1)}
	err = c.Collect(ctx, bad)
	require.Error(t, err)
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.True(t, se.Remote)
	assert.Equal(t, monitor.CodeRefused, se.Code)
	assert.Contains(t, se.Message, "more than 1024")
	assert.True(t, monitor.IsRefused(err))

	// The first report's host is invalid, the later ones' not.
	var takes atomic.Int32
	host := func() string {
		if takes.Add(1) == 1 {
			return strings.Repeat("h", store.MaxFieldLen+1)
		}
		return "127.0.0.1"
	}
	m := monitor.New(monitor.WithIdentity("app", "127.0.0.1"))
	r, err := monitor.NewReporter(m, monitor.ReporterOptions{Send: c.Collect, Host: host, Interval: time.Hour, SendTimeout: 30 * time.Second})
	require.NoError(t, err)
	defer func() { _ = r.Close(ctx) }()

	require.NoError(t, r.Flush(ctx), "report 1 refused: dropped, not an error")
	require.NoError(t, r.Flush(ctx), "report 2")
	require.NoError(t, r.Flush(ctx), "report 3")
	rs := r.Stats()
	assert.Equal(t, monitor.ReporterStats{Taken: 3, Sent: 2, Refused: 1, Failures: 1}, rs)
	ss, err := st.Stats(ctx, time.Time{})
	require.NoError(t, err)
	assert.EqualValues(t, 2, ss.Reports, "reports 2 and 3 stored")
	assert.EqualValues(t, 1, ss.Senders)
}
