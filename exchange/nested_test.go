package exchange_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

// A handler that calls the same server over the connection its own
// request came on gets its answer, however the server runs requests: the
// connection is read on while a request runs. (A reader busy running the
// handler would leave the inner request unread until the caller's
// timeout: one provider method calling another of the same process, as a
// relay does, shares the consumer's connection to that port.) Lone calls,
// one at a time, and concurrent ones, each three calls deep.
func TestHandlerCallsBackOverItsOwnConnection(t *testing.T) {
	ctx := testCtx(t)
	var client atomic.Pointer[exchange.Client]
	h := exchange.HandlerFunc(func(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
		n, err := strconv.Atoi(string(req.Body))
		if err != nil {
			return nil, err
		}
		out := "0"
		if n > 0 {
			inner, err := call(ctx, client.Load(), strconv.Itoa(n-1))
			if err != nil {
				return nil, err
			}
			out = strconv.Itoa(n) + " " + inner
		}
		f := exchange.NewFrame()
		f.B = append(f.B, out...)
		return f, nil
	})
	_, addr := serve(t, h, nil)
	client.Store(dial(t, addr, nil))
	want := map[int]string{0: "0", 1: "1 0", 2: "2 1 0", 3: "3 2 1 0"}
	for range 20 {
		for depth := range 4 {
			got, err := call(ctx, client.Load(), strconv.Itoa(depth))
			require.NoError(t, err, "depth %d", depth)
			require.Equal(t, want[depth], got)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := call(ctx, client.Load(), "3")
				if err == nil && got != want[3] {
					err = fmt.Errorf("got %q, want %q", got, want[3])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
