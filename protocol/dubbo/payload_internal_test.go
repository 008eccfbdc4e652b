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
// the consumer's argument and the provider's result are copied into their
// frames below spliceMin bytes and spliced from spliceMin on (the frame
// then holds only the header, the request's head and msgpack's prefix);
// the provider's argument and the consumer's reply are copies (the method
// and the caller own them).
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
		require.Equal(t, large, f.Spliced(), "size %d: argument spliced", size)
		if large {
			require.Less(t, len(f.B), exchange.HeaderSize+64, "the argument is not copied into the frame")
		} else {
			require.True(t, within(f.B[len(f.B)-size:], f.B))
		}
		body := f.AppendTo(nil)[exchange.HeaderSize:]
		require.Equal(t, len(body), exchange.BodyLen(f))

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

// plainEncoder hides the header-only methods of the encoder it wraps:
// arguments are then copied into the frame, as with a serializer that
// cannot splice.
type plainEncoder struct{ serialize.Encoder }

// TestGrowAllocatesOnce: encoding a large argument that is copied into a
// small frame allocates about once (the frame grown for it), not once per
// doubling; one that is spliced does not grow the frame at all.
func TestGrowAllocatesOnce(t *testing.T) {
	ser := serialize.NewMsgpack()
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "bench.Echo", nil)
	for _, arg := range []any{bytes.Repeat([]byte("g"), 64<<10), string(bytes.Repeat([]byte("s"), 64<<10))} {
		inv := &protocol.Invocation{Method: "Echo", Args: []any{arg}}
		for _, plain := range []bool{true, false} {
			var err error
			spliced, capB := false, 0
			// 200 runs, not 20: under -race sync.Pool drops a random
			// quarter of what is put back, about one allocation per run on
			// average here, and AllocsPerRun's truncated mean of 20 runs
			// reached 5 in about 1 run of 30 (3 without -race, always).
			allocs := testing.AllocsPerRun(200, func() {
				f := exchange.NewFrame()
				f.B = f.B[:len(f.B):len(f.B)]
				var enc serialize.Encoder = ser.NewEncoder(f)
				if plain {
					enc = plainEncoder{enc}
				}
				err = encodeRequest(enc, f, inv, u, 1000, nil)
				enc.Release()
				spliced, capB = f.Spliced(), cap(f.B)
				f.B = nil // not pooled: every run starts small
				f.Release()
			})
			require.NoError(t, err)
			require.Equal(t, !plain, spliced)
			if plain {
				// The frame's first array and one growth for the
				// argument, not one per doubling, the wrapper, and a
				// pooled buffer that -race drops now and then.
				require.LessOrEqual(t, allocs, 4.0, "%T copied", arg)
			} else {
				require.Less(t, capB, 4096, "%T spliced: the frame does not grow for it", arg)
				// The frame's first array and the small head's growth
				// (the test leaves the frame no room), and a pooled
				// buffer that -race drops now and then: nothing for the
				// argument, whose size capB bounds.
				require.LessOrEqual(t, allocs, 4.0, "%T spliced", arg)
			}
		}
	}
}
