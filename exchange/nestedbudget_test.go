package exchange_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

// TestNestedCallPassesReservation: a handler holding a 2.5 MiB request
// of a 4 MiB budget calls a service of its own process (the same server,
// the same budget) with 64 KiB, while a stranger's 2 MiB request waits
// for memory and the budget is reserved for it. The reserved request
// waits for the handler's memory, the handler for its nested call: were
// the nested request held back by the reservation as a stranger's is,
// the handler would wait for its call's timeout (here 3 s; audit 01:44
// (b)). The nested request comes from a connection this process made
// (its two ends are the server connection's, swapped), so it passes the
// reservation when it fits: the outer call is answered, then the
// stranger's.
func TestNestedCallPassesReservation(t *testing.T) {
	ctx := testCtx(t)
	const outer, stranger, inner = 5 << 19, 2 << 20, 64 << 10
	proceed := make(chan struct{})
	entered := make(chan struct{}, 1)
	var self *exchange.Client
	h := exchange.HandlerFunc(func(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
		f := exchange.NewFrame()
		switch len(req.Body) {
		case outer:
			entered <- struct{}{}
			select {
			case <-proceed:
			case <-ctx.Done():
				f.Release()
				return nil, ctx.Err()
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			got, err := call(cctx, self, strings.Repeat("n", inner))
			if err != nil {
				f.Release()
				return nil, err
			}
			f.B = append(f.B, "outer:"...)
			f.B = append(f.B, got[:4]...)
		default:
			f.B = append(f.B, req.Body...)
		}
		return f, nil
	})
	s, addr := serve(t, h, &exchange.Options{MaxMemory: 4 << 20, MaxMemoryPerIP: 4 << 20, MaxPayload: 5 << 19, FrameTimeout: time.Second})
	caller := dial(t, addr, nil)
	self = dial(t, addr, nil)

	answered := make(chan error, 1)
	go func() {
		got, err := call(ctx, caller, strings.Repeat("o", outer))
		if err == nil && got != "outer:nnnn" {
			err = &unexpected{got}
		}
		answered <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the outer request was not served")
	}
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	req := make([]byte, exchange.HeaderSize+stranger)
	hdr := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: 1, Length: stranger}
	hdr.Put(req)
	go func() { _, _ = nc.Write(req) }() // waits in TCP
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond, "the stranger's request waits")
	reserved(t, s, addr)
	start := time.Now()
	close(proceed)
	select {
	case err := <-answered:
		require.NoError(t, err, "the nested call waited behind the reservation (%v)", time.Since(start))
	case <-ctx.Done():
		t.Fatal("the outer call was not answered")
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, exchange.HeaderSize+stranger)
	_, err = io.ReadFull(nc, got)
	require.NoError(t, err, "the stranger's request was not answered")
}

type unexpected struct{ got string }

func (u *unexpected) Error() string { return "unexpected answer " + u.got }

// reserved returns once s's budget is reserved for a waiting request: a
// 16 KiB request from a stranger, which fits, is then held back (it
// waits: Throttled) instead of answered. It sends one at a time until
// one waits.
func reserved(t *testing.T, s *exchange.Server, addr string) {
	t.Helper()
	probe, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	answers := make(chan error, 1)
	done, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { probe.Close(); close(done); <-exited })
	go func() {
		defer close(exited)
		for {
			got := make([]byte, exchange.HeaderSize+16<<10)
			_, err := io.ReadFull(probe, got)
			select {
			case answers <- err:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	req := make([]byte, exchange.HeaderSize+16<<10)
	for i := range 1000 {
		hdr := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: uint64(i + 1), Length: 16 << 10}
		hdr.Put(req)
		before := s.Throttled()
		_, err := probe.Write(req)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(answers) > 0 || s.Throttled() > before }, 10*time.Second, time.Millisecond,
			"a 16 KiB request neither answered nor held back")
		if s.Throttled() > before {
			return
		}
		require.NoError(t, <-answers)
	}
	t.Fatal("the budget was never reserved")
}
