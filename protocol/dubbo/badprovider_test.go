package dubbo_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// okReply is the body of a dubbo answer whose value is the string "hi"
// and which has no attachments.
var okReply = []byte{0x01, 0xa2, 'h', 'i', 0x80}

// stallingProvider is a provider on 127.0.0.1 whose first connection
// answers its first call with the header of a reply of MaxPayload bytes
// and nothing more; every later connection answers every call with
// okReply. It returns its URL (timeout 100 ms) and how many connections
// it accepted.
func stallingProvider(t *testing.T) (*protocol.URL, *atomic.Int32) {
	return stallingProviderOf(t, exchange.DefaultMaxPayload)
}

// stallingProviderOf is stallingProvider whose stalled reply declares a
// body of length bytes.
func stallingProviderOf(t *testing.T, length int) (*protocol.URL, *atomic.Int32) {
	return stallingProviderOn(t, length, nil)
}

// stallingProviderOn is stallingProviderOf speaking TLS with config cfg
// (nil: plain TCP).
func stallingProviderOn(t *testing.T, length int, cfg *tls.Config) (*protocol.URL, *atomic.Int32) {
	var accepted atomic.Int32
	a := fakepeer.Listen(t, func(nc net.Conn, _ <-chan struct{}) {
		if cfg != nil {
			nc = tls.Server(nc, cfg)
		}
		defer nc.Close()
		stall := accepted.Add(1) == 1
		for {
			h, err := fakepeer.SkipFrame(nc)
			if err != nil {
				return
			}
			if h.Event {
				continue
			}
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(len(okReply))}
			if stall {
				out.Length = uint32(length)
			}
			b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(okReply))
			out.Put(b)
			if !stall {
				b = append(b, okReply...)
			}
			if _, err := nc.Write(b); err != nil {
				return
			}
			if stall {
				_, _ = io.Copy(io.Discard, nc) // until the consumer closes it
				return
			}
		}
	})
	return protocol.NewURL("dubbo", "127.0.0.1", a.Port, "demo.Greeter", map[string]string{protocol.KeyTimeout: "100"}), &accepted
}

// TestStalledReplyRedialled: a provider that declares an 8 MiB reply and
// stalls in it: the call ends at its timeout with an error naming the
// provider, the connection is closed at FrameTimeout and dialled again,
// and calls are answered on the new connection.
func TestStalledReplyRedialled(t *testing.T) {
	ctx := testCtx(t)
	u, accepted := stallingProvider(t)
	cli := newProtocol(t, &dubbo.Options{FrameTimeout: 300 * time.Millisecond, Reconnect: 10 * time.Millisecond})
	inv := refer(t, cli, u)
	var err error
	for range 100 {
		_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
		// Under load the first dial can take longer than the call's
		// 100 ms: such a call is not sent (the dial goes on), and the
		// next goes on the connection it makes.
		if !errors.Is(err, status.ErrClosed) || !errors.Is(err, context.DeadlineExceeded) {
			break
		}
	}
	var te *status.TimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(u.Port), te.Addr)
	require.ErrorContains(t, err, "127.0.0.1:"+strconv.Itoa(u.Port))

	require.Eventually(t, func() bool { return accepted.Load() == 2 }, testTimeout, time.Millisecond, "dialled again after FrameTimeout")
	var got string
	require.Eventually(t, func() bool {
		_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: &got})
		return err == nil
	}, testTimeout, time.Millisecond, "answered on the new connection: %v", err)
	require.Equal(t, "hi", got)
	require.Equal(t, int32(2), accepted.Load())
}

// TestReplyBombsEveryReplyType: replies whose msgpack claims far more
// than the body holds (str, bin, array and map headers of 2^31 in a
// 7-byte body), nests 100,000 deep, or packs 1 MiB of one-byte elements,
// decoded into each kind of reply a caller may pass (none, *any, slices,
// maps, *[]byte): the call fails with ErrBadResponse, counted, and costs
// the consumer at most 4× the body + 64 KiB. 1 MiB of nils into *[]byte
// cost 18× before the explanation of a failed decode was bounded
// (serialize).
func TestReplyBombsEveryReplyType(t *testing.T) {
	oneMiB := func(elem byte) []byte {
		return append([]byte{0x01, 0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{elem}, 1<<20)...)
	}
	bodies := map[string][]byte{
		"array32 of 2^31":       {0x01, 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01},
		"map32 of 2^31":         {0x01, 0xdf, 0x7f, 0xff, 0xff, 0xff, 0x01, 0x01},
		"str32 of 2^31":         {0x01, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'},
		"bin32 of 2^31":         {0x01, 0xc6, 0x7f, 0xff, 0xff, 0xff, 'a'},
		"100,000 deep":          append(append([]byte{0x01}, bytes.Repeat([]byte{0x91}, 100_000)...), 0xc0),
		"1 MiB of nils":         oneMiB(0xc0),
		"1 MiB of empty maps":   oneMiB(0x80),
		"1 MiB of empty arrays": oneMiB(0x90),
	}
	replies := map[string]func() any{
		"none":              func() any { return nil },
		"*any":              func() any { return new(any) },
		"*[]string":         func() any { return new([]string) },
		"*map[string]any":   func() any { return new(map[string]any) },
		"*[]byte":           func() any { return new([]byte) },
		"*[]map[string]int": func() any { return new([]map[string]int) },
	}
	for bn, body := range bodies {
		t.Run(bn, func(t *testing.T) {
			ctx := testCtx(t)
			cli := newProtocol(t, &dubbo.Options{FrameTimeout: testTimeout})
			inv := refer(t, cli, hostileProvider(t, body))
			n := uint64(0)
			for rn, reply := range replies {
				var err error
				got := allocatedDuring(func() {
					_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: reply()})
				})
				n++
				require.ErrorIs(t, err, status.ErrBadResponse, rn)
				require.Less(t, got, uint64(4*len(body)+64<<10), "%s: a %d-byte reply cost %d bytes", rn, len(body), got)
				st := cli.Stats()
				require.Equal(t, n, st.BadAttachments+st.BadBodies, rn)
			}
		})
	}
}

// TestRemoteErrorMessageBounded: a business error's message is the
// provider's text, like a status answer's: cut at
// exchange.MaxStatusMessage, control characters as U+FFFD (a provider
// put 1 MiB with terminal escapes into the caller's error).
func TestRemoteErrorMessageBounded(t *testing.T) {
	ctx := testCtx(t)
	msg := append([]byte("\x1b[2Jout of stock\n"), bytes.Repeat([]byte{'e'}, 1<<20)...)
	body := []byte{0x00, 0x07, 0xdb, 0, 0, 0, 0} // kind error, code 7, str32
	binary.BigEndian.PutUint32(body[3:], uint32(len(msg)))
	body = append(append(body, msg...), 0x80)
	inv := refer(t, newProtocol(t, nil), hostileProvider(t, body))
	_, err := inv.Invoke(ctx, &protocol.Invocation{Method: "SayHello", Args: []any{"x"}, Reply: new(string)})
	var se *service.Error
	require.ErrorAs(t, err, &se)
	require.Less(t, len(se.Message), exchange.MaxStatusMessage+100, "the message is bounded")
	require.True(t, se.Remote)
	require.Equal(t, service.Code(7), se.Code)
	require.True(t, strings.HasPrefix(se.Message, "\uFFFD[2Jout of stock\neee"), se.Message[:40])
	require.True(t, strings.HasSuffix(se.Message, "… ("+strconv.Itoa(len(msg)-exchange.MaxStatusMessage)+" more bytes cut)"), se.Message[len(se.Message)-40:])
}
