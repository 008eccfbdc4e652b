package dubbo_test

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/transport"
)

func TestOptionsValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *dubbo.Options
		want string // "" for valid
	}{
		{"nil", nil, ""},
		{"zero", &dubbo.Options{}, ""},
		{"defaults", func() *dubbo.Options { o := dubbo.DefaultOptions(); return &o }(), ""},
		{"Connections", &dubbo.Options{Connections: -1}, "dubbo: Connections -1 is negative (want 0 for the default 1, or more)"},
		{"MaxPayload", &dubbo.Options{MaxPayload: -1}, "dubbo: MaxPayload -1 is negative (want 0 for the default 8388608, or more)"},
		{"Heartbeat", &dubbo.Options{Heartbeat: -time.Second}, "dubbo: Heartbeat -1s is negative (want 0 for the default 30s, or more)"},
		{"Workers", &dubbo.Options{Workers: -1}, "Workers -1"},
		{"Queue", &dubbo.Options{Queue: -1}, "Queue -1"},
		{"MaxConcurrent", &dubbo.Options{MaxConcurrent: -1}, "dubbo: MaxConcurrent -1 is negative (want 0 for no limit, or more)"},
		{"DialTimeout", &dubbo.Options{DialTimeout: -time.Second}, "DialTimeout -1s"},
		{"Reconnect", &dubbo.Options{Reconnect: -time.Second}, "dubbo: Reconnect -1s"},
		{"MaxReconnect", &dubbo.Options{MaxReconnect: -time.Second}, "dubbo: MaxReconnect -1s"},
		{"MaxConnections", &dubbo.Options{MaxConnections: -1}, "MaxConnections -1"},
		{"FrameTimeout", &dubbo.Options{FrameTimeout: -time.Second}, "FrameTimeout -1s"},
		{"Attachments.MaxEntries", &dubbo.Options{Attachments: serialize.MapLimits{MaxEntries: -1}}, "Attachments.MaxEntries -1"},
		{"Attachments.MaxKey", &dubbo.Options{Attachments: serialize.MapLimits{MaxKey: -1}}, "Attachments.MaxKey -1"},
		{"Attachments.MaxValue", &dubbo.Options{Attachments: serialize.MapLimits{MaxValue: -1}}, "Attachments.MaxValue -1"},
		{"Attachments.MaxBytes", &dubbo.Options{Attachments: serialize.MapLimits{MaxBytes: -1}}, "Attachments.MaxBytes -1"},
		{"MaxTimeout", &dubbo.Options{MaxTimeout: -time.Second}, "dubbo: MaxTimeout -1s"},
		{"MaxProviderTimeout", &dubbo.Options{MaxProviderTimeout: -time.Second}, "MaxProviderTimeout -1s"},
		{"MaxMemory", &dubbo.Options{MaxMemory: -1}, "dubbo: MaxMemory -1 is negative (want 0 for the default, 256 MiB or twice MaxPayload, or more)"},
		{"MaxMemory below a call", &dubbo.Options{MaxMemory: 4 << 20}, "dubbo: MaxMemory 4194304 is less than one frame of MaxPayload 8388608"},
		{"MaxMemory above a call", &dubbo.Options{MaxMemory: 4 << 20, MaxPayload: 1 << 20}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			_, newErr := dubbo.New(tc.o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, err, newErr, "New refuses what Validate refuses")
		})
	}
}

// The defaults the protocol hands down are the lower layers', declared once.
func TestDefaultOptionsReferLowerLayers(t *testing.T) {
	d, ed, td := dubbo.DefaultOptions(), exchange.DefaultOptions(), transport.DefaultOptions()
	require.Equal(t, ed.MaxPayload, d.MaxPayload)
	require.Equal(t, td.MaxPayload, d.MaxPayload)
	require.Equal(t, ed.Heartbeat, d.Heartbeat)
	require.Equal(t, ed.Workers, d.Workers)
	require.Equal(t, ed.Queue, d.Queue)
	require.Equal(t, ed.MaxConcurrent, d.MaxConcurrent)
	require.Equal(t, td.MaxConns, d.MaxConnections)
	require.Equal(t, td.FrameTimeout, d.FrameTimeout)
	require.Equal(t, td.MaxMemory, d.MaxMemory)
	require.Equal(t, ed.MaxMemory, d.MaxMemory)
	require.Equal(t, td.MaxMemoryPerIP, d.MaxMemoryPerIP)
	require.Equal(t, ed.MaxMemoryPerIP, d.MaxMemoryPerIP)
	require.NotNil(t, d.Serializers)
	require.Equal(t, serialize.Builtin().Names(), d.Serializers.Names())
}

// TestProtocolOptionsInForce: Protocol.Options reports the options given
// to New with every zero field set to its default, and is a copy.
func TestProtocolOptionsInForce(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *dubbo.Options
		want dubbo.Options // the limits only
	}{
		{"nil", nil, dubbo.Options{MaxMemory: 256 << 20, MaxMemoryPerIP: 32 << 20, MaxReplyMemory: 256 << 20, FrameTimeout: 5 * time.Second, MaxPayload: 8 << 20}},
		{"memory given", &dubbo.Options{MaxMemory: 64 << 20, FrameTimeout: 2 * time.Second},
			dubbo.Options{MaxMemory: 64 << 20, MaxMemoryPerIP: 8 << 20, MaxReplyMemory: 256 << 20, FrameTimeout: 2 * time.Second, MaxPayload: 8 << 20}},
		// Twice a large MaxPayload (and its header) when more than 256 MiB.
		{"large payload", &dubbo.Options{MaxPayload: 200 << 20, MaxMemoryPerIP: 1 << 20},
			dubbo.Options{MaxMemory: 2 * (200<<20 + 16), MaxMemoryPerIP: 1 << 20, MaxReplyMemory: 2 * (200<<20 + 16), FrameTimeout: 5 * time.Second, MaxPayload: 200 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := dubbo.New(tc.in)
			require.NoError(t, err)
			defer p.Close()
			got := p.Options()
			require.Equal(t, tc.want.MaxMemory, got.MaxMemory)
			require.Equal(t, tc.want.MaxMemoryPerIP, got.MaxMemoryPerIP)
			require.Equal(t, tc.want.MaxReplyMemory, got.MaxReplyMemory)
			require.Equal(t, tc.want.FrameTimeout, got.FrameTimeout)
			require.Equal(t, tc.want.MaxPayload, got.MaxPayload)
			d := dubbo.DefaultOptions()
			require.Equal(t, d.Connections, got.Connections)
			require.Equal(t, d.Heartbeat, got.Heartbeat)
			require.Equal(t, 3*d.Heartbeat, got.IdleTimeout)
			require.Equal(t, d.Attachments, got.Attachments)
			require.NotNil(t, got.Serializers)
			require.NotNil(t, got.Logger)
		})
	}
}

// TestProtocolOptionsIsACopy: changing what Options returned, its TLS
// configurations included, changes nothing in the Protocol.
func TestProtocolOptionsIsACopy(t *testing.T) {
	p, err := dubbo.New(&dubbo.Options{ClientTLS: &tls.Config{ServerName: "a", MinVersion: tls.VersionTLS10}})
	require.NoError(t, err)
	defer p.Close()
	o := p.Options()
	require.Equal(t, uint16(tls.VersionTLS12), o.ClientTLS.MinVersion, "as in force: raised to TLS 1.2")
	require.Nil(t, o.ServerTLS)
	o.MaxMemory = 1
	o.ClientTLS.ServerName = "b"
	again := p.Options()
	require.Equal(t, 256<<20, again.MaxMemory)
	require.Equal(t, "a", again.ClientTLS.ServerName)
}

// TestValidateNamesTheMemoryDefault: what Validate says a zero MaxMemory
// or MaxReplyMemory stands for is what a Protocol runs with.
func TestValidateNamesTheMemoryDefault(t *testing.T) {
	p, err := dubbo.New(nil)
	require.NoError(t, err)
	defer p.Close()
	o := p.Options()
	for name, bad := range map[string]*dubbo.Options{"MaxMemory": {MaxMemory: -1}, "MaxReplyMemory": {MaxReplyMemory: -1}} {
		want := o.MaxMemory
		if name == "MaxReplyMemory" {
			want = o.MaxReplyMemory
		}
		require.ErrorContains(t, bad.Validate(), fmt.Sprintf("(want 0 for the default, %d MiB or twice MaxPayload, or more)", want>>20), name)
	}
}
