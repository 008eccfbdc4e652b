package dubbo_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

// manyExt is an array16 of n fixext1 values of ext type 5, which no one
// registered.
func manyExt(n int) []byte {
	return append([]byte{0xdc, byte(n >> 8), byte(n)}, bytes.Repeat([]byte{0xd4, 0x05, 0x01}, n)...)
}

// TestExtTypesInArguments: msgpack ext values (types nobody registered,
// one declaring 2 GiB, a timestamp where a string or a struct is
// declared) in a request's arguments get status.BadRequest before any
// method runs, and the connection's next caller is served.
func TestExtTypesInArguments(t *testing.T) {
	ctx := testCtx(t)
	g, inv, u := setup(t, nil, nil)
	person := func(name []byte) []byte {
		return append(append([]byte{0x01, 0x82, 0xa4, 'n', 'a', 'm', 'e'}, name...), 0xa3, 'a', 'g', 'e', 0x01)
	}
	// The same frames with a plain string are answered: what is refused
	// is the ext value.
	valid := head(t, "demo.Greeter", "Greet", 1000, msgpackMap(t, nil), person([]byte{0xa1, 'x'}))
	code, msg, err := rawCall(t, u.Address(), rawFrame(valid, uint32(len(valid))))
	require.NoError(t, err)
	require.Equal(t, status.OK, code, msg)
	for name, c := range map[string]struct {
		method string
		args   []byte // the argument count, then the arguments
	}{
		"unknown ext for a string":   {"SayHello", []byte{0x01, 0xd4, 0x05, 0x01}},
		"fixext16 for a string":      {"SayHello", append([]byte{0x01, 0xd8, 0x7f}, make([]byte, 16)...)},
		"ext32 declaring 2 GiB":      {"SayHello", []byte{0x01, 0xc9, 0x7f, 0xff, 0xff, 0xff, 0x05}},
		"timestamp for a string":     {"SayHello", []byte{0x01, 0xd6, 0xff, 0, 0, 0, 1}},
		"unknown ext in a struct":    {"Greet", person([]byte{0xd4, 0x05, 0x01})},
		"1000 unknown ext values":    {"Greet", append([]byte{0x01}, manyExt(1000)...)},
		"timestamp of a bad length":  {"SayHello", []byte{0x01, 0xc7, 0x03, 0xff, 1, 2, 3}},
		"ext8 declaring 200, has 10": {"SayHello", append([]byte{0x01, 0xc7, 200, 0x05}, make([]byte, 10)...)},
	} {
		t.Run(name, func(t *testing.T) {
			body := head(t, "demo.Greeter", c.method, 1000, msgpackMap(t, nil), c.args)
			code, msg, err := rawCall(t, u.Address(), rawFrame(body, uint32(len(body))))
			require.NoError(t, err, "answered, not cut off")
			require.Equal(t, status.BadRequest, code, msg)
		})
	}
	require.Equal(t, int64(1), g.calls.Load(), "no method ran but for the valid frame")
	res, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}})
	require.NoError(t, err)
	require.Equal(t, "hello x", res.Value)
}

// TestExtTypesInResponses: a provider that answers with msgpack ext values
// nobody registered fails the call with status.ErrBadResponse, into a
// typed reply and into none; a timestamp ext decodes as a time where no
// type is declared and fails into a string.
func TestExtTypesInResponses(t *testing.T) {
	for name, c := range map[string]struct {
		value []byte
		reply func() any
		ok    bool
	}{
		"unknown ext, no reply":       {[]byte{0xd4, 0x05, 0x01}, func() any { return nil }, false},
		"unknown ext into a string":   {[]byte{0xd4, 0x05, 0x01}, func() any { return new(string) }, false},
		"1000 unknown ext, no reply":  {manyExt(1000), func() any { return nil }, false},
		"1000 unknown ext into []any": {manyExt(1000), func() any { return new([]any) }, false},
		"timestamp, no reply":         {[]byte{0xd6, 0xff, 0, 0, 0, 1}, func() any { return nil }, true},
		"timestamp into a string":     {[]byte{0xd6, 0xff, 0, 0, 0, 1}, func() any { return new(string) }, false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			body := append(append([]byte{0x01}, c.value...), 0x80) // value, no attachments
			inv := refer(t, newProtocol(t, nil), hostileProvider(t, body))
			_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: c.reply()})
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, status.ErrBadResponse)
		})
	}
}
