package exchange_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

// spliceBack answers with the request's body after its first byte, the
// way the first byte says: 'k' spliced from the body itself, with
// KeepBody; 'c' spliced from a copy, without KeepBody (a handler that
// decoded its argument as a copy and returns it); 's' copied into the
// frame, with KeepBody (nothing spliced: nothing to keep).
type spliceBack struct{}

func (spliceBack) Handle(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
	f := exchange.NewFrame()
	p := req.Body[1:]
	switch req.Body[0] {
	case 'k':
		req.KeepBody = true
		f.Splice(p)
	case 'c':
		f.Splice(bytes.Clone(p))
	case 's':
		req.KeepBody = true
		f.B = append(f.B, p...)
	}
	return f, nil
}

// TestResponseHoldsRequestOnlyWhenKept: a response frame holds its
// request's frame until it is written only when the handler set
// KeepBody and the frame splices bytes; otherwise the request's frame
// is released as soon as the handler returns, before the response is
// sent (the server reports which, before it sends the response). Each
// reply is the payload it was sent, whichever way.
func TestResponseHoldsRequestOnlyWhenKept(t *testing.T) {
	answers := exchange.WatchAnswers(t)
	_, addr := serve(t, spliceBack{}, nil)
	c := dial(t, addr, nil)
	ctx := testCtx(t)
	payload := strings.Repeat("0123456789abcdef", 1<<10) // 16 KiB
	for _, tc := range []struct {
		how   string
		holds bool
	}{
		{"c", false}, // default: the argument was a copy
		{"k", true},  // borrowed: the reply is bytes of the request
		{"s", false}, // kept, but the reply is a copy in the frame
		{"c", false},
		{"k", true},
	} {
		got, err := call(ctx, c, tc.how+payload)
		require.NoError(t, err)
		require.Equal(t, payload, got, tc.how)
		select {
		case holds := <-answers:
			require.Equal(t, tc.holds, holds, "%s: the response holds the request's frame", tc.how)
		default:
			t.Fatalf("%s: answered with no report", tc.how)
		}
	}
	require.Empty(t, answers)
}
