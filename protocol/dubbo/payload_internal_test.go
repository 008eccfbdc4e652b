package dubbo

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
)

// within reports whether p's bytes lie inside buf's.
func within(p, buf []byte) bool {
	if len(p) == 0 || len(buf) == 0 {
		return false
	}
	a, s := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return a >= s && a+uintptr(len(p)) <= s+uintptr(len(buf))
}

// TestPayloadCopies counts the copies of a []byte payload in the codec:
// the consumer's request frame is grown once for a large argument; the
// provider's argument and the consumer's reply are copies (the method and
// the caller own them); the provider's result is copied into the response
// frame below spliceMin bytes and spliced from spliceMin on, and then the
// frame holds only the header and msgpack's prefix.
func TestPayloadCopies(t *testing.T) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	types := []reflect.Type{bytesType}
	for _, size := range []int{581, spliceMin - 1, spliceMin, 16 << 10} {
		payload := bytes.Repeat([]byte("p"), size)
		large := size >= spliceMin

		f := exchange.NewFrame()
		if large {
			f.B = f.B[:len(f.B):len(f.B)] // a small pooled frame: no room
		}
		enc := ser.NewEncoder(f)
		require.NoError(t, encodeRequest(enc, f, &protocol.Invocation{Method: "Echo", Args: []any{payload}}, u, 1000, nil))
		enc.Release()
		body := exchange.Body(f)
		if large {
			require.Less(t, cap(f.B)-len(f.B), 1024, "size %d: grown once, to about what it needs", size)
		}

		dec, err := ser.NewDecoder(body)
		require.NoError(t, err)
		r, err := decodeRequestHead(dec, serialize.MapLimits{}, nil)
		require.NoError(t, err)
		args, err := decodeArgs(dec, &r, types, true, nil)
		dec.Release()
		require.NoError(t, err)
		require.Equal(t, payload, args[0])
		require.False(t, within(args[0].([]byte), body), "the argument is the method's own copy")

		resp, err := encodeResponse(ser, &protocol.Result{Value: payload}, nil)
		require.NoError(t, err)
		require.Equal(t, large, resp.Spliced(), "size %d: spliced", size)
		if large {
			require.Less(t, len(resp.B), exchange.HeaderSize+16, "the payload is not copied into the frame")
		} else {
			require.True(t, within(resp.B[len(resp.B)-size-1:len(resp.B)-1], resp.B))
		}
		whole := resp.AppendTo(nil)
		require.Equal(t, len(whole)-exchange.HeaderSize, exchange.BodyLen(resp))
		resp.Release()

		var reply []byte
		rbody := whole[exchange.HeaderSize:]
		_, err = decodeResponse(ser, rbody, &protocol.Invocation{Reply: &reply}, serialize.MapLimits{})
		require.NoError(t, err)
		require.Equal(t, payload, reply)
		require.False(t, within(reply, rbody), "the reply is the caller's own copy")
		f.Release()
	}
}

// TestGrowAllocatesOnce: encoding a large argument into a small frame
// allocates about once (the frame grown for it), not once per doubling.
func TestGrowAllocatesOnce(t *testing.T) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	inv := &protocol.Invocation{Method: "Echo", Args: []any{bytes.Repeat([]byte("g"), 64<<10)}}
	allocs := testing.AllocsPerRun(20, func() {
		f := exchange.NewFrame()
		f.B = f.B[:len(f.B):len(f.B)]
		enc := ser.NewEncoder(f)
		_ = encodeRequest(enc, f, inv, u, 1000, nil)
		enc.Release()
		f.B = nil // not pooled: every run starts small
		f.Release()
	})
	require.LessOrEqual(t, allocs, 3.0, "the frame grows once (plus the small head's growth)")
}
