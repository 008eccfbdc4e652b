package exchange_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/fakepeer"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// partialProvider is a provider on 127.0.0.1 that answers the first
// request of a connection with an echo, the second with the header of a
// size-byte response and the first part bytes of its body, and the rest
// of that body once rest is closed (restSent is closed once it is
// written); it echoes the later requests after that.
func partialProvider(t *testing.T, size, part int) (addr string, rest, restSent chan struct{}) {
	return partialProviderOn(t, nil, size, part, nil)
}

// partialProviderOn is partialProvider speaking TLS with config cfg (nil:
// plain TCP), which writes the rest of the body in one write(2) there too
// (its TLS records at once); with resume not nil, it reads no request
// after that rest until resume is closed.
func partialProviderOn(t *testing.T, cfg *tls.Config, size, part int, resume <-chan struct{}) (addr string, rest, restSent chan struct{}) {
	rest, restSent = make(chan struct{}), make(chan struct{})
	a := fakepeer.Listen(t, func(raw net.Conn, quit <-chan struct{}) {
		bc := &batchConn{Conn: raw}
		var nc net.Conn = bc
		if cfg != nil {
			nc = tls.Server(bc, cfg)
		}
		defer nc.Close()
		for n := 0; ; {
			h, body, err := readFrame(nc)
			if err != nil {
				return
			}
			if h.Event {
				continue
			}
			var hdr [exchange.HeaderSize]byte
			if n++; n != 2 {
				out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: h.Length}
				out.Put(hdr[:])
				if _, err := nc.Write(append(hdr[:], body...)); err != nil {
					return
				}
				continue
			}
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(size)}
			out.Put(hdr[:])
			if _, err := nc.Write(append(hdr[:], make([]byte, part)...)); err != nil {
				return
			}
			select {
			case <-rest:
			case <-quit:
				return
			}
			bc.batch = true
			if _, err = nc.Write(make([]byte, size-part)); err == nil {
				err = bc.flush()
			}
			close(restSent)
			if err != nil {
				return
			}
			if resume != nil {
				select {
				case <-resume:
				case <-quit:
					return
				}
			}
		}
	})
	return a.String(), rest, restSent
}

// batchConn is a provider's connection whose writes, while batch is set,
// are kept until flush writes them at once.
type batchConn struct {
	net.Conn
	batch bool
	buf   []byte
}

func (c *batchConn) Write(p []byte) (int, error) {
	if c.batch {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// flush writes what was kept and stops keeping.
func (c *batchConn) flush() error {
	c.batch = false
	_, err := c.Conn.Write(c.buf)
	c.buf = nil
	return err
}

// Calls that time out behind a response in progress close the connection
// when nothing of it came for long enough (stuckBehind), but bytes of it
// that wait unread in the socket came: this process has not read them
// (its reader was not run), the provider is not stalled. Here a caller
// reads a response's header and part of its body, stops (its context),
// and the standby goroutine that takes the reading role over is held
// while the rest of the body waits in the socket; calls of 500 ms time
// out behind it one after the other, their expiries over a second (a
// tenth of FrameTimeout) apart with the same response in progress and the
// same bytes of it read. The connection stays open, and once the reader
// runs it reads the response and answers the calls after it.
func TestBytesWaitingUnreadAreNotAStall(t *testing.T) {
	const size, part = 64 << 10, 8 << 10
	addr, rest, restSent := partialProvider(t, size, part)
	ctx, c := warmClient(t, addr, &exchange.Options{ReplyBudget: transport.NewBudget(0), FrameTimeout: 10 * time.Second})
	held, release := exchange.HoldStandbyReads(t)

	// The caller reads the response's header and its first part.
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	first := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx1, 0, 27, request("partial"))
		first <- err
	}()
	require.Eventually(t, func() bool {
		p := c.Reading()
		return p.Frame != 0 && p.Arrived == part && p.Unread == 0
	}, 10*time.Second, time.Millisecond, "the caller read the response's header and first part")
	frame := c.Reading().Frame
	require.Equal(t, uint64(1), c.Led())

	// A call waits behind it, so that the standby goroutine is handed the
	// role when the caller stops; it is held before it reads.
	behind := c.Go(ctx, 0, 27, request("behind"))
	cancel1()
	require.ErrorIs(t, <-first, context.Canceled)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the standby goroutine was not handed the reading role")
	}
	require.Equal(t, uint64(1), c.Stops(), "the caller stopped reading within the response")

	// The rest of the body waits in the socket (and the answers to the
	// calls after it, as they come).
	close(rest)
	<-restSent
	require.Eventually(t, func() bool {
		return c.Reading().Unread >= size-part
	}, 10*time.Second, time.Millisecond, "the rest of the body is in the socket")

	for i := range 5 {
		_, err := c.Call(ctx, 500*time.Millisecond, 27, request("late"))
		var te *status.TimeoutError
		require.True(t, errors.As(err, &te), "call %d: want its own timeout, got %v", i, err)
		require.NoError(t, c.Err(), "after call %d: the connection was closed", i)
		p := c.Reading()
		require.Equal(t, frame, p.Frame, "the same response in progress")
		require.Equal(t, int64(part), p.Arrived, "nothing more of it read")
		require.GreaterOrEqual(t, p.Unread, size-part, "the rest of it waits in the socket")
	}

	// The reader runs: the response is read (late: its caller stopped),
	// then the answers of the calls after it.
	release()
	resp, err := behind.Result()
	require.NoError(t, err)
	require.Equal(t, "behind", string(exchange.Body(resp)))
	resp.Release()
	require.NoError(t, echoes(ctx, c, "after"))
	require.Equal(t, uint64(6), c.Late(), "the stopped caller's response and the 5 timed out calls'")
	require.NoError(t, c.Err())
}

// headerOnlyProvider is a provider on 127.0.0.1 that answers the first
// request of a connection with the header of a response of length bytes
// and nothing more, and reads on without answering.
func headerOnlyProvider(t *testing.T, length int) string {
	return partHeaderProvider(t, length, exchange.HeaderSize)
}

// partHeaderProvider is headerOnlyProvider that sends only the first n
// bytes of that header.
func partHeaderProvider(t *testing.T, length, n int) string {
	a := fakepeer.Listen(t, func(nc net.Conn, _ <-chan struct{}) {
		defer nc.Close()
		for answered := false; ; {
			h, _, err := readFrame(nc)
			if err != nil {
				return
			}
			if h.Event || answered {
				continue
			}
			answered = true
			var hdr [exchange.HeaderSize]byte
			out := exchange.Header{Serializer: h.Serializer, Status: status.OK, ID: h.ID, Length: uint32(length)}
			out.Put(hdr[:])
			if _, err := nc.Write(hdr[:n]); err != nil {
				return
			}
		}
	})
	return a.String()
}

// A response of up to 4 KiB (never charged to a ReplyBudget) whose
// provider sends its header and stalls holds up every call behind it on
// the connection, as a large one does: calls that time out behind it
// close the connection once it got no byte for a tenth of FrameTimeout
// (200 ms here), with or without a ReplyBudget, instead of timing out
// until FrameTimeout (2 s: about 20 calls of 100 ms) cuts it.
func TestCallsBehindStalledSmallResponseCloseConnection(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReplyBudget=%v", withBudget), func(t *testing.T) {
			addr := headerOnlyProvider(t, 4<<10-exchange.HeaderSize)
			opts := &exchange.Options{FrameTimeout: 2 * time.Second}
			if withBudget {
				opts.ReplyBudget = transport.NewBudget(0)
			}
			ctx := testCtx(t)
			c := dial(t, addr, opts)
			callsUntilClosed(ctx, t, c)
			require.ErrorIs(t, c.Err(), status.ErrConnLost)
			require.ErrorContains(t, c.Err(), "provider "+addr+" sent 0 bytes of a response's body and nothing more for at least")
			require.ErrorContains(t, c.Err(), "if the provider is honest but pauses this long mid-response, raise FrameTimeout", "what to do")
		})
	}
}

// A provider that stops within a response's header holds up the calls
// behind it as one that stops within its body: they close the connection
// the same way (the connection watches a response from its first byte).
func TestCallsBehindStalledHeaderCloseConnection(t *testing.T) {
	addr := partHeaderProvider(t, 100, exchange.HeaderSize-6)
	ctx := testCtx(t)
	c := dial(t, addr, &exchange.Options{FrameTimeout: 2 * time.Second})
	callsUntilClosed(ctx, t, c)
	require.ErrorIs(t, c.Err(), status.ErrConnLost)
	require.ErrorContains(t, c.Err(), "provider "+addr+" sent part of a response's header and nothing more for at least")
}

// callsUntilClosed makes 100 ms calls on c, one after another, until c is
// closed: at least one must time out first, every other must fail
// because c closed, and c must close within 15 calls.
func callsUntilClosed(ctx context.Context, t *testing.T, c *exchange.Client) {
	t.Helper()
	timeouts := 0
	for i := 0; c.Err() == nil; i++ {
		require.Less(t, i, 15, "still open after %d calls (%d timed out)", i, timeouts)
		_, err := c.Call(ctx, 100*time.Millisecond, 27, request("x"))
		var te *status.TimeoutError
		if errors.As(err, &te) {
			timeouts++
			continue
		}
		require.ErrorIs(t, err, status.ErrClosed, "call %d", i)
	}
	require.NotZero(t, timeouts)
}
