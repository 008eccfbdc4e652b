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
	"github.com/minidubbo/minidubbo/transport"
)

type keeper struct {
	ok    bool
	asked int
}

func (k *keeper) KeepBody() bool { k.asked++; return k.ok }

// within reports whether p's bytes lie inside buf's.
func within(p, buf []byte) bool {
	if len(p) == 0 || len(buf) == 0 {
		return false
	}
	a, s := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return a >= s && a+uintptr(len(p)) <= s+uintptr(len(buf))
}

// TestPayloadCopies counts the copies of a []byte payload in the codec:
// from inPlaceMin bytes, none into a response frame (spliced) and none out
// of a request or response body that can be kept (a slice of it, and the
// body is kept); below it, or when the body cannot be kept, one copy.
func TestPayloadCopies(t *testing.T) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	types := []reflect.Type{bytesType}
	for _, size := range []int{581, inPlaceMin - 1, inPlaceMin, 16 << 10} {
		payload := bytes.Repeat([]byte("p"), size)
		large := size >= inPlaceMin

		// Consumer: the request frame is grown once for the argument.
		f := exchange.NewFrame()
		enc := ser.NewEncoder(f)
		require.NoError(t, encodeRequest(enc, f, &protocol.Invocation{Method: "Echo", Args: []any{payload}}, u, 1000, nil))
		enc.Release()
		body := exchange.Body(f)

		// Provider: the argument.
		for _, k := range []*keeper{nil, {ok: false}, {ok: true}} {
			dec, err := ser.NewDecoder(body)
			require.NoError(t, err)
			r, err := decodeRequestHead(dec, serialize.MapLimits{}, nil)
			require.NoError(t, err)
			var kb bodyKeeper
			if k != nil {
				kb = k
			}
			args, err := decodeArgs(dec, &r, types, true, nil, kb)
			dec.Release()
			require.NoError(t, err)
			arg := args[0].([]byte)
			require.Equal(t, payload, arg)
			inPlace := large && k != nil && k.ok
			require.Equal(t, inPlace, within(arg, body), "size %d keeper %+v: argument in place", size, k)
			if k != nil {
				require.Equal(t, b2i(large), k.asked, "size %d: the body is kept only for a large argument", size)
			}
		}

		// Provider: the response, with the result spliced when large.
		resp, err := encodeResponse(ser, &protocol.Result{Value: payload}, nil)
		require.NoError(t, err)
		require.Equal(t, large, resp.Spliced(), "size %d: spliced", size)
		if large {
			require.Less(t, len(resp.B), exchange.HeaderSize+16, "the payload is not copied into the frame")
		}
		whole := resp.AppendTo(nil)
		require.Equal(t, len(whole)-exchange.HeaderSize, exchange.BodyLen(resp))
		resp.Release()

		// Consumer: the reply, in place when there is a frame to keep.
		for _, withFrame := range []bool{false, true} {
			var frame *transport.Buffer
			if withFrame {
				frame = transport.GetBuffer()
				frame.B = append(frame.B, whole...)
			}
			rbody := whole[exchange.HeaderSize:]
			if frame != nil {
				rbody = exchange.Body(frame)
			}
			var reply []byte
			_, err := decodeResponse(ser, rbody, &protocol.Invocation{Reply: &reply}, serialize.MapLimits{}, frame)
			require.NoError(t, err)
			require.Equal(t, payload, reply)
			require.Equal(t, large && withFrame, within(reply, rbody), "size %d frame %v: reply in place", size, withFrame)
			if frame != nil {
				frame.Release()
				if large {
					require.Equal(t, payload, reply, "a kept frame is not reused")
				}
			}
		}
		f.Release()
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
