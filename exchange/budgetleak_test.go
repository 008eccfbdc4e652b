package exchange_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
)

// rawFrame is a frame with header h and body, h.Length set to len(body).
func rawFrame(h exchange.Header, body []byte) []byte {
	h.Length = uint32(len(body))
	b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
	h.Put(b)
	return append(b, body...)
}

// budgetPaths runs once every way a frame the server read, or an answer
// it queued, can end, on connections of its own to s at addr: answered,
// failed, panicked, one-way, a heartbeat, a response and an event sent to
// the server, an answer over MaxPayload, an answer to a peer that closed
// before it was written, a peer that floods without reading and leaves, a
// frame cut off by its peer, a bad magic, a frame over MaxPayload, a call
// its caller gave up on; then connections that wait for memory while
// others stall in frames charged whole, until all of them go. It returns
// once every call ended and every raw connection was closed on this side.
func budgetPaths(t *testing.T, ctx context.Context, s *exchange.Server, addr string, e *echo, round int) {
	t.Helper()
	c := dial(t, addr, nil)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	check := func(err error) {
		if err != nil {
			errs <- err
		}
	}
	for i := range 4 {
		wg.Go(func() { check(echoes(ctx, c, fmt.Sprintf("small %d/%d", round, i))) })
	}
	wg.Go(func() { check(echoes(ctx, c, strings.Repeat("m", 200<<10))) })
	wg.Go(func() {
		got, err := call(ctx, c, "big:300000")
		if err == nil && len(got) != 300000 {
			err = fmt.Errorf("big answer of %d bytes", len(got))
		}
		check(err)
	})
	wg.Go(func() {
		if _, err := call(ctx, c, "panic"); err == nil {
			check(fmt.Errorf("panic answered without an error"))
		}
	})
	wg.Go(func() {
		if _, err := call(ctx, c, "notfound"); err == nil {
			check(fmt.Errorf("notfound answered without an error"))
		}
	})
	wg.Go(func() {
		// The caller gives up; the handler ends with the connection's
		// context or its release, and its answer reaches nobody.
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, err := call(cctx, c, "block"); err == nil {
			check(fmt.Errorf("block answered"))
		}
	})
	// An answer larger than MaxPayload is replaced by an error answer.
	wg.Go(func() {
		if _, err := call(ctx, c, fmt.Sprintf("big:%d", 2<<20)); err == nil {
			check(fmt.Errorf("an answer over MaxPayload went out"))
		}
	})

	raw := func(name string, write func(net.Conn) error, readAll bool) {
		wg.Go(func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				check(err)
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(hostileTimeout))
			if err := write(nc); err != nil {
				check(fmt.Errorf("%s: %w", name, err))
				return
			}
			if readAll {
				// Until the server closes the connection.
				_, _ = io.Copy(io.Discard, nc)
			}
		})
	}
	req := exchange.Header{Request: true, TwoWay: true, Serializer: 27}
	oneway := exchange.Header{Request: true, Serializer: 27}
	raw("one-way, then a heartbeat answered", func(nc net.Conn) error {
		b := rawFrame(oneway, []byte("one-way"))
		b = append(b, rawFrame(oneway, make([]byte, 100<<10))...)
		b = append(b, rawFrame(exchange.Header{Request: true, TwoWay: true, Event: true, ID: 9}, nil)...)
		if _, err := nc.Write(b); err != nil {
			return err
		}
		hb := make([]byte, exchange.HeaderSize)
		if _, err := io.ReadFull(nc, hb); err != nil {
			return err
		}
		h, err := exchange.ParseHeader(hb)
		if err == nil && (!h.Event || h.ID != 9) {
			err = fmt.Errorf("not the heartbeat's answer: %+v", h)
		}
		return err
	}, false)
	raw("a response and an event sent to the server", func(nc net.Conn) error {
		b := rawFrame(exchange.Header{Serializer: 27, ID: 3}, make([]byte, 70<<10))
		b = append(b, rawFrame(exchange.Header{Request: true, Event: true}, []byte("R"))...)
		_, err := nc.Write(b)
		return err
	}, false)
	raw("answers to a peer gone before they are written", func(nc net.Conn) error {
		var b []byte
		for i := range 8 {
			h := req
			h.ID = uint64(i)
			b = append(b, rawFrame(h, []byte("big:200000"))...)
		}
		_, err := nc.Write(b)
		return err
	}, false)
	raw("a flood never read", func(nc net.Conn) error {
		var b []byte
		for i := range 300 {
			h := req
			h.ID = uint64(i)
			b = append(b, rawFrame(h, []byte("big:20000"))...)
		}
		_, err := nc.Write(b)
		return err
	}, false)
	raw("a frame cut off by its peer", func(nc net.Conn) error {
		b := rawFrame(req, make([]byte, 300<<10))
		_, err := nc.Write(b[:100<<10])
		return err
	}, false)
	raw("a bad magic after a call", func(nc net.Conn) error {
		b := rawFrame(req, []byte("x"))
		b = append(b, 0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x')
		_, err := nc.Write(b)
		return err
	}, true)
	raw("a frame over MaxPayload", func(nc net.Conn) error {
		h := make([]byte, exchange.HeaderSize)
		req.Put(h)
		binary.BigEndian.PutUint32(h[12:], 2<<20)
		_, err := nc.Write(h)
		return err
	}, true)
	wg.Wait()

	// Connections that wait for memory while others stall in frames
	// charged whole, and then all go.
	throttled := s.Throttled()
	var stalled []net.Conn
	for range 6 {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		stalled = append(stalled, nc)
		_, err = nc.Write(rawFrame(req, make([]byte, 900<<10))[:300<<10])
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Throttled() >= throttled+2 }, hostileTimeout, time.Millisecond,
		"round %d: connections waiting for memory", round)
	for _, nc := range stalled {
		nc.Close()
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for len(e.started) > 0 {
		<-e.started // that handler ends with its connection
	}
}

// TestBudgetGivenBackOnEveryPath: a provider runs for a long time, and a
// charge that one path forgets to give back is lost for good: the budget
// then shrinks call after call until the server reads nothing larger than
// 4 KiB. Every way a frame can end (budgetPaths), 10 rounds over, leaves
// the budget at exactly zero, and a call that needs almost all of it is
// still read and answered after them; a Shutdown with connections waiting
// for memory and a running handler ends, at zero too.
func TestBudgetGivenBackOnEveryPath(t *testing.T) {
	if testing.Short() {
		t.Skip("10 rounds of every path")
	}
	// A minute for each round and for the end, not one for the whole
	// run: at load 10 the run took 20-30 s.
	phase := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	const limit = 4 << 20
	e := newEcho()
	// Every peer comes from 127.0.0.1: no bound per address.
	s, addr := serve(t, e, &exchange.Options{MaxMemory: limit, MaxMemoryPerIP: limit, MaxPayload: 1 << 20})
	b := s.Budget()
	for round := range 10 {
		budgetPaths(t, phase(), s, addr, e, round)
		if !assert.Eventually(t, func() bool { return b.Used() == 0 && s.Conns() == 0 }, hostileTimeout, time.Millisecond) {
			t.Fatalf("round %d: budget used %d, %d connections", round, b.Used(), s.Conns())
		}
	}
	t.Logf("10 rounds: budget back to 0 after each; connections throttled %d times", s.Throttled())
	ctx := phase()
	c := dial(t, addr, nil)
	require.NoError(t, echoes(ctx, c, strings.Repeat("w", 1<<20-64)), "a call of almost MaxPayload")
	require.NoError(t, c.Close())

	// Shutdown while one handler runs and connections wait for memory.
	holder := dial(t, addr, nil)
	held := make(chan error, 1)
	go func() {
		_, err := call(ctx, holder, "block")
		held <- err
	}()
	<-e.started
	var stuck []net.Conn
	defer func() {
		for _, nc := range stuck {
			nc.Close()
		}
	}()
	throttled := s.Throttled()
	for range 6 {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		stuck = append(stuck, nc)
		_, err = nc.Write(rawFrame(exchange.Header{Request: true, TwoWay: true}, make([]byte, 900<<10))[:600<<10])
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Throttled() >= throttled+2 }, hostileTimeout, time.Millisecond)
	shut := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer scancel()
		shut <- s.Shutdown(sctx)
	}()
	select {
	case <-shut:
	case <-time.After(hostileTimeout):
		t.Fatal("Shutdown did not end while connections waited for memory")
	}
	<-held
	require.Eventually(t, func() bool { return b.Used() == 0 }, hostileTimeout, time.Millisecond, "after Shutdown")
}
