package transport_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *transport.Options
		want string // "" for valid
	}{
		{"nil", nil, ""},
		{"zero", &transport.Options{}, ""},
		{"defaults", func() *transport.Options { o := transport.DefaultOptions(); return &o }(), ""},
		{"MaxPayload", &transport.Options{MaxPayload: -1}, "transport: MaxPayload -1 is negative (want 0 for the default 8388608, or more)"},
		{"HandshakeTimeout", &transport.Options{HandshakeTimeout: -time.Second}, "transport: HandshakeTimeout -1s is negative (want 0 for the default 10s, or more)"},
		{"MaxQueue", &transport.Options{MaxQueue: -1}, "MaxQueue -1"},
		{"ReadBufferSize", &transport.Options{ReadBufferSize: -1}, "ReadBufferSize -1"},
		{"WriteBufferSize", &transport.Options{WriteBufferSize: -1}, "WriteBufferSize -1"},
		{"FrameTimeout", &transport.Options{FrameTimeout: -time.Millisecond}, "FrameTimeout -1ms"},
		{"MaxConns", &transport.Options{MaxConns: -5}, "MaxConns -5"},
		{"MaxMemory", &transport.Options{MaxMemory: -1}, "transport: MaxMemory -1 is negative (want 0 for the default, "},
		{"MaxMemory below a frame", &transport.Options{MaxMemory: 1 << 20}, "transport: MaxMemory 1048576 is less than one frame of MaxPayload 8388608 (and its 16-byte header): such a frame could never be read; raise MaxMemory or lower MaxPayload"},
		{"MaxMemoryPerIP", &transport.Options{MaxMemoryPerIP: -1}, "transport: MaxMemoryPerIP -1 is negative (want 0 for the default, an eighth of the memory budget, or more)"},
		{"MaxMemory one frame", &transport.Options{MaxMemory: 1<<20 + transport.HeaderSize, MaxPayload: 1 << 20}, ""},
		{"MaxMemory below MaxPayload", &transport.Options{MaxMemory: 1 << 20, MaxPayload: 1 << 20}, "MaxMemory 1048576 is less than one frame of MaxPayload 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestValidateNamesTheMemoryDefault: what Validate says a zero MaxMemory
// stands for is what DefaultOptions holds (it follows DefaultMaxMemory).
func TestValidateNamesTheMemoryDefault(t *testing.T) {
	want := fmt.Sprintf("transport: MaxMemory -1 is negative (want 0 for the default, %d MiB or twice MaxPayload, or more)",
		transport.DefaultOptions().MaxMemory>>20)
	require.EqualError(t, (&transport.Options{MaxMemory: -1}).Validate(), want)
}

func TestDefaultOptions(t *testing.T) {
	require.Equal(t, transport.Options{
		MaxPayload:       transport.DefaultMaxPayload,
		HandshakeTimeout: transport.DefaultHandshakeTimeout,
		MaxQueue:         transport.DefaultMaxQueue,
		ReadBufferSize:   transport.DefaultBufferSize,
		WriteBufferSize:  transport.DefaultBufferSize,
		FrameTimeout:     transport.DefaultFrameTimeout,
		MaxConns:         transport.DefaultMaxConns,
		MaxMemory:        transport.DefaultMaxMemory,
	}, transport.DefaultOptions())
}

// Invalid options are refused where each entry point can say so: Dial
// returns the error, Serve returns it, NewConn closes the connection with it.
func TestInvalidOptionsRefused(t *testing.T) {
	bad := &transport.Options{MaxPayload: -1}
	ctx := testCtx(t)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, err = transport.Dial(ctx, l.Addr().String(), newRecorder(false), bad)
	require.ErrorContains(t, err, "MaxPayload")

	srv := transport.NewServer(newRecorder(false), bad)
	sl, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorContains(t, srv.Serve(sl), "MaxPayload")
	require.NoError(t, srv.Close())

	x, y := net.Pipe()
	defer y.Close()
	r := newRecorder(false)
	c := transport.NewConn(x, r, bad)
	require.ErrorContains(t, recvErr(t, ctx, r.closed), "MaxPayload")
	require.NoError(t, c.Close())
}
