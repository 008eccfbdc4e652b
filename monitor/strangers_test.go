package monitor_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/store"
	"github.com/minidubbo/minidubbo/protocol"
)

// TestStrangersCannotGrowTheMonitor: on the provider side a row's consumer
// is the remote.application attachment and address the caller sends. A
// caller sending a new name with every call made a new row each time,
// kept for ever (the map copied at each one), and the report past 10000
// rows, or with a name over 1024 bytes or not UTF-8, was refused by the
// monitor service every time it was sent. Past MaxKeys, new consumers
// count under OtherConsumers; bad names under InvalidConsumer.
func TestStrangersCannotGrowTheMonitor(t *testing.T) {
	defer monitor.SetMaxKeys(50)()
	m := monitor.New(monitor.WithIdentity("shop", "10.0.0.1:20880"))
	rec := m.ProviderRecorder()
	call := func(app string, port int) {
		inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello",
			Attachments: map[string]string{protocol.KeyRemoteApplication: app},
			RemoteAddr:  &net.TCPAddr{IP: net.IPv4(10, 1, byte(port>>8), byte(port)), Port: port}}
		rec.End(inv, rec.Begin(inv), &protocol.Result{}, nil)
	}
	call(strings.Repeat("a", 2000), 1)
	call("shop\xff", 2)
	for i := range 1000 {
		call("app"+strconv.Itoa(i), i+3)
	}
	r := m.TakeReport()
	r.Seq = 1
	require.NoError(t, store.Validate(r), "the monitor service stores the report")
	assert.Len(t, r.Rows, 51, "50 keys, then one for the others")
	calls, total := map[string]int64{}, int64(0)
	for _, w := range r.Rows {
		calls[strings.SplitN(w.Consumer, "@", 2)[0]] += w.Calls
		total += w.Calls
	}
	assert.Equal(t, int64(1002), total, "every call counted once")
	assert.Equal(t, int64(2), calls[monitor.InvalidConsumer])
	assert.Equal(t, int64(1000-48), calls[monitor.OtherConsumers])
}
