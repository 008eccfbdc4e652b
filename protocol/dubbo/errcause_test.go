package dubbo

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
)

// The provider's answer to a request it cannot decode is ErrBadRequest
// with the decoder's error still in it (wrapped, not flattened into the
// text): a provider-side filter, log or counter can ask errors.Is what went
// wrong. Only the code and the message cross the wire.
func TestBadRequestKeepsItsCause(t *testing.T) {
	s := fuzzServer(t)
	head := fuzzHead(t, "M")
	long := func() []byte {
		var b bytes.Buffer
		enc := serialize.NewMsgpack().NewEncoder(&b)
		defer enc.Release()
		require.NoError(t, enc.EncodeString(strings.Repeat("s", maxNameLen+1)))
		return b.Bytes()
	}()
	cases := []struct {
		name  string
		body  []byte
		cause error
	}{
		{"name over the limit", long, serialize.ErrLimit},
		{"body ends in the head", head[:len(head)-1], io.EOF},
		{"attachments over the limit", append(append([]byte(nil), head...), 0xde, 0xff, 0xff), serialize.ErrLimit},
		{"argument nested too deep", append(append(fuzzHead(t, "Any"), 0x80, 0x01),
			bytes.Repeat([]byte{0x91}, serialize.MaxDepth+10)...), serialize.ErrLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := s.Handle(context.Background(), &exchange.Request{Header: exchange.Header{Serializer: serialize.MsgpackID}, Body: c.body})
			if err == nil {
				resp.Release()
			}
			require.ErrorIs(t, err, status.ErrBadRequest)
			require.ErrorIs(t, err, c.cause)
			require.Equal(t, status.BadRequest, status.CodeOf(err))
		})
	}
}
