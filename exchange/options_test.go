package exchange_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

func TestOptionsValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *exchange.Options
		want string // "" for valid
	}{
		{"nil", nil, ""},
		{"zero", &exchange.Options{}, ""},
		{"defaults", func() *exchange.Options { o := exchange.DefaultOptions(); return &o }(), ""},
		{"MaxConcurrent limit", &exchange.Options{MaxConcurrent: 10}, ""},
		{"MaxPayload", &exchange.Options{MaxPayload: -1}, "exchange: MaxPayload -1 is negative (want 0 for the default 8388608, or more)"},
		{"Heartbeat", &exchange.Options{Heartbeat: -time.Second}, "exchange: Heartbeat -1s is negative (want 0 for the default 30s, or more)"},
		{"MaxConcurrent", &exchange.Options{MaxConcurrent: -1}, "exchange: MaxConcurrent -1 is negative (want 0 for no limit, or more)"},
		{"IdleTimeout", &exchange.Options{IdleTimeout: -time.Second}, "exchange: IdleTimeout -1s is negative (want 0 for the default, 3 heartbeats, or more)"},
		{"Workers", &exchange.Options{Workers: -1}, "exchange: Workers -1 is negative (want 0 for the default 512, or more)"},
		{"Queue", &exchange.Options{Queue: -1}, "Queue -1"},
		{"WorkerIdle", &exchange.Options{WorkerIdle: -time.Second}, "WorkerIdle -1s"},
		{"MaxConns", &exchange.Options{MaxConns: -1}, "transport: MaxConns -1"},
		{"FrameTimeout", &exchange.Options{FrameTimeout: -time.Second}, "transport: FrameTimeout -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			_, err = exchange.NewServer(nil, tc.o)
			require.ErrorContains(t, err, tc.want, "NewServer validates")
			_, err = exchange.Dial(t.Context(), "127.0.0.1:1", tc.o)
			require.ErrorContains(t, err, tc.want, "Dial validates before dialling")
		})
	}
}

// The limits exchange shares with transport are declared there, once.
func TestDefaultOptionsReferTransport(t *testing.T) {
	d, td := exchange.DefaultOptions(), transport.DefaultOptions()
	require.Equal(t, td.MaxPayload, d.MaxPayload)
	require.Equal(t, td.MaxConns, d.MaxConns)
	require.Equal(t, td.FrameTimeout, d.FrameTimeout)
	require.Equal(t, td.MaxMemoryPerIP, d.MaxMemoryPerIP)
	require.Equal(t, exchange.DefaultHeartbeat, d.Heartbeat)
	require.Equal(t, exchange.DefaultWorkers, d.Workers)
	require.Equal(t, exchange.DefaultQueue, d.Queue)
	require.Equal(t, exchange.DefaultWorkerIdle, d.WorkerIdle)
	require.Zero(t, d.MaxConcurrent, "no limit by default")
}
