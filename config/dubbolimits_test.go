package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol/dubbo"
)

// TestDubboLimitsFromYAML: the dubbo limits of a protocols entry are the
// limits the application's dubbo protocol runs with (dubbo.Protocol.Options,
// defaults filled in), each over the same field of WithProtocolOptions,
// which keeps the fields the YAML leaves unset.
func TestDubboLimitsFromYAML(t *testing.T) {
	given := dubbo.Options{MaxMemory: 1 << 30, MaxPayload: 1 << 20, Connections: 3, FrameTimeout: 9 * time.Second}
	for _, tc := range []struct {
		yaml string
		want dubbo.Options
	}{
		{`protocols: {dubbo: {port: 0}}`, dubbo.Options{MaxMemory: 1 << 30, MaxMemoryPerIP: 128 << 20, MaxReplyMemory: 256 << 20, FrameTimeout: 9 * time.Second, MaxPayload: 1 << 20, Connections: 3}},
		{`protocols:
  dubbo:
    max_memory: 67108864
    max_memory_per_ip: 4194304
    max_reply_memory: 33554432
    frame_timeout: 2s
    max_payload: 65536
`, dubbo.Options{MaxMemory: 64 << 20, MaxMemoryPerIP: 4 << 20, MaxReplyMemory: 32 << 20, FrameTimeout: 2 * time.Second, MaxPayload: 64 << 10, Connections: 3}},
		// Two dubbo entries: one sets a limit, the other the same value
		// or nothing; both ports get it.
		{`protocols:
  a: {max_memory: 67108864, frame_timeout: 3s}
  b: {name: dubbo, max_memory: 67108864}
`, dubbo.Options{MaxMemory: 64 << 20, MaxMemoryPerIP: 8 << 20, MaxReplyMemory: 256 << 20, FrameTimeout: 3 * time.Second, MaxPayload: 1 << 20, Connections: 3}},
	} {
		c, err := Parse(strings.NewReader(tc.yaml))
		require.NoError(t, err, tc.yaml)
		app, err := New(c, WithProtocolOptions(given))
		require.NoError(t, err, tc.yaml)
		p, err := app.protos.get(dubbo.Name)
		require.NoError(t, err, tc.yaml)
		got := p.(dubboProtocol).Options()
		require.Equal(t, tc.want.MaxMemory, got.MaxMemory, tc.yaml)
		require.Equal(t, tc.want.MaxMemoryPerIP, got.MaxMemoryPerIP, tc.yaml)
		require.Equal(t, tc.want.MaxReplyMemory, got.MaxReplyMemory, tc.yaml)
		require.Equal(t, tc.want.FrameTimeout, got.FrameTimeout, tc.yaml)
		require.Equal(t, tc.want.MaxPayload, got.MaxPayload, tc.yaml)
		require.Equal(t, tc.want.Connections, got.Connections, tc.yaml)
		require.NoError(t, app.Shutdown(t.Context()))
	}
}

// TestDubboLimitErrors: a bad limit is refused at New with a KeyError
// naming its YAML path, with advice in YAML terms; two dubbo entries that
// set one differently are refused, not one of them picked.
func TestDubboLimitErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml   string
		given  dubbo.Options
		key    string
		want   string
		advice string
	}{
		{yaml: `protocols: {dubbo: {max_memory: -1}}`, key: "protocols.dubbo.max_memory",
			want:   "config: protocols.dubbo.max_memory -1: must not be negative",
			advice: "write a positive number of bytes, or 0 or nothing for the default, 256 MiB or twice max_payload"},
		{yaml: `protocols: {dubbo: {frame_timeout: -2s}}`, key: "protocols.dubbo.frame_timeout",
			want:   "config: protocols.dubbo.frame_timeout -2s: must not be negative",
			advice: "write a positive duration, such as 5s, or 0 or nothing for the default, 5s"},
		{yaml: `protocols: {dubbo: {max_memory: 1000}}`, key: "protocols.dubbo.max_memory",
			want:   "config: protocols.dubbo.max_memory 1000 is less than one frame of max_payload 8388608 and its 16-byte header: such a frame could never be read",
			advice: "raise max_memory to at least 8388624, or lower max_payload"},
		{yaml: `protocols: {dubbo: {max_reply_memory: 65536, max_payload: 65536}}`, key: "protocols.dubbo.max_reply_memory",
			want:   "config: protocols.dubbo.max_reply_memory 65536 is less than one frame of max_payload 65536 and its 16-byte header: such a frame could never be read",
			advice: "raise max_reply_memory to at least 65552, or lower max_payload"},
		// The memory given in Go, the payload in YAML: the YAML key is blamed.
		{yaml: `protocols: {dubbo: {max_payload: 2097152}}`, given: dubbo.Options{MaxMemory: 1 << 20, MaxPayload: 512 << 10}, key: "protocols.dubbo.max_payload",
			want:   "config: protocols.dubbo.max_payload 2097152: one frame of it and its 16-byte header is more than max_memory 1048576: such a frame could never be read",
			advice: "raise max_memory to at least 2097168, or lower max_payload"},
		{yaml: "protocols:\n  a: {max_memory_per_ip: 1048576}\n  b: {name: dubbo, max_memory_per_ip: 2097152}\n", key: "protocols.b.max_memory_per_ip",
			want:   "config: protocols.b.max_memory_per_ip 2097152 differs from protocols.a.max_memory_per_ip 1048576",
			advice: "the application makes one dubbo protocol for every dubbo entry, and its limits hold for all their ports: give the same value in both entries, or set it in one only"},
	} {
		c, err := Parse(strings.NewReader(tc.yaml))
		if err == nil {
			// Parse validates too; New checks against WithProtocolOptions.
			_, err = New(c, WithProtocolOptions(tc.given))
		}
		require.EqualError(t, err, tc.want+" ("+tc.advice+")", tc.yaml)
		var ke *KeyError
		require.True(t, errors.As(err, &ke), tc.yaml)
		require.Equal(t, tc.key, ke.Key)
		require.Equal(t, tc.advice, ke.Advice)
	}
}

// TestDubboLimitOnOtherProtocol: the limits are the dubbo protocol's; on
// an entry of another protocol they are refused, not ignored.
func TestDubboLimitOnOtherProtocol(t *testing.T) {
	c := &Config{Protocols: map[string]ProtocolConfig{"x": {Name: "grpc", MaxPayload: 1024}}}
	err := c.Validate()
	require.EqualError(t, err, "config: protocols.x.max_payload 1024: a limit of the dubbo protocol, and this entry's protocol is grpc (remove it; give the protocol's own limits in Go, with its factory (WithProtocol))")
}

// TestDubboLimitKeysKnown: the unknown-key check knows the new keys and
// lists them for a typo.
func TestDubboLimitKeysKnown(t *testing.T) {
	_, err := Parse(strings.NewReader("protocols: {dubbo: {max_memroy: 1}}\n"))
	require.EqualError(t, err, `config: protocols.dubbo.max_memroy (line 1): unknown key; did you mean "max_memory"? (known in protocols.dubbo: frame_timeout, host, max_memory, max_memory_per_ip, max_payload, max_reply_memory, name, port, register_address, serialization, tls)`)
	_, err = Parse(strings.NewReader("protocols: {dubbo: {frame_timeout: 5}}\n"))
	require.EqualError(t, err, "config: protocols.dubbo.frame_timeout (line 1): 5 is not a duration: durations need a unit, such as 5s or 5ms")
}

// TestDubboLimitAdviceNamesTheDefault: the default that a negative
// limit's advice names is the one the dubbo protocol runs with
// (dubbo.Protocol.Options of a protocol made with no options), and the
// rules it states ("an eighth of max_memory", "or twice max_payload")
// are the protocol's.
func TestDubboLimitAdviceNamesTheDefault(t *testing.T) {
	inForce := func(o *dubbo.Options) dubbo.Options {
		p, err := dubbo.New(o)
		require.NoError(t, err)
		defer p.Close()
		return p.Options()
	}
	def := inForce(nil)
	big := inForce(&dubbo.Options{MaxPayload: 300 << 20})
	want := map[string]string{
		"max_memory":        sizeText(def.MaxMemory),
		"max_memory_per_ip": "an eighth of max_memory",
		"max_reply_memory":  sizeText(def.MaxReplyMemory),
		"frame_timeout":     def.FrameTimeout.String(),
		"max_payload":       sizeText(def.MaxPayload),
	}
	require.Equal(t, def.MaxMemory/8, def.MaxMemoryPerIP, "an eighth")
	require.Equal(t, 8<<20, inForce(&dubbo.Options{MaxMemory: 64 << 20}).MaxMemoryPerIP, "an eighth")
	require.GreaterOrEqual(t, big.MaxMemory, 2*big.MaxPayload, "twice max_payload")
	require.GreaterOrEqual(t, big.MaxReplyMemory, 2*big.MaxPayload, "twice max_payload")
	require.Len(t, dubboLimitKeys, len(want))
	for _, l := range dubboLimitKeys {
		v := "-1"
		if l.duration {
			v = "-1s"
		}
		_, err := Parse(strings.NewReader("protocols: {dubbo: {" + l.key + ": " + v + "}}\n"))
		var ke *KeyError
		require.True(t, errors.As(err, &ke), l.key)
		_, said, ok := strings.Cut(ke.Advice, "or 0 or nothing for the default, ")
		require.True(t, ok, ke.Advice)
		said = strings.TrimSuffix(said, " or twice max_payload")
		require.Equal(t, want[l.key], said, l.key)
	}
}

func TestSizeText(t *testing.T) {
	require.Equal(t, "256 MiB", sizeText(256<<20))
	require.Equal(t, "64 KiB", sizeText(64<<10))
	require.Equal(t, "1000 bytes", sizeText(1000))
	require.Equal(t, "0 bytes", sizeText(0))
}
