package dubbo

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
)

// keepSum borrows its argument and answers with a number.
type keepSum struct{ handleEchoBorrowed }

func (keepSum) Sum(_ context.Context, b service.Borrowed) (int64, error) { return int64(len(b)), nil }

// TestKeepBodyOnlyForBorrowedArguments: the provider asks the exchange
// server to keep a request's frame until the response is written
// (exchange.Request.KeepBody) only when it decoded an argument as a
// slice of the request (a service.Borrowed, msgpack); a []byte argument
// (the default) and a Borrowed one that json decoded are copies, and
// their spliced 16 KiB replies do not keep the request's frame.
func TestKeepBodyOnlyForBorrowedArguments(t *testing.T) {
	arg := bytes.Repeat([]byte("p"), 16<<10)
	for _, tc := range []struct {
		name, method string
		impl         any
		ser          serialize.Serializer
		serID        byte
		keep         bool
	}{
		{"bytes", "Echo", handleEchoBytes{}, serialize.NewMsgpack(), serialize.MsgpackID, false},
		{"borrowed", "Echo", handleEchoBorrowed{}, serialize.NewMsgpack(), serialize.MsgpackID, true},
		{"borrowed, not returned", "Sum", keepSum{}, serialize.NewMsgpack(), serialize.MsgpackID, true},
		{"bytes, json", "Echo", handleEchoBytes{}, serialize.NewJSON(), serialize.JSONID, false},
		{"borrowed, json", "Echo", handleEchoBorrowed{}, serialize.NewJSON(), serialize.JSONID, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(nil)
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "keep.Echo", nil)
			inv, err := proxy.NewProvider(u, tc.impl)
			require.NoError(t, err)
			s := &server{p: p, names: newInterner()}
			s.store(map[string]*exported{u.ServiceKey(): {inv: inv, typer: argTyperOf(inv), serID: tc.serID,
				names: exportedNames(u, inv), id: serviceID{u.Interface(), u.Version(), u.Group()}}})
			var body bytes.Buffer
			enc := tc.ser.NewEncoder(&body)
			require.NoError(t, encodeRequest(enc, nil, &protocol.Invocation{Method: tc.method, Args: []any{arg}}, u, 1000, nil))
			enc.Release()
			req := &exchange.Request{Header: exchange.Header{Serializer: tc.serID}, Body: body.Bytes()}
			resp, err := s.Handle(context.Background(), req)
			require.NoError(t, err)
			defer resp.Release()
			if tc.method == "Echo" && tc.serID == serialize.MsgpackID {
				require.True(t, resp.Spliced(), "the 16 KiB reply is spliced")
			}
			require.Equal(t, tc.keep, req.KeepBody)
		})
	}
}
