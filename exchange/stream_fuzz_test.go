package exchange_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// streamTimeout bounds each wait of FuzzClientStream.
const streamTimeout = 20 * time.Second

// responseFrame is a response with header h (its Length set) and body.
func responseFrame(h exchange.Header, body string) []byte {
	h.Length = uint32(len(body))
	b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
	h.Put(b)
	return append(b, body...)
}

// streamPeer is a provider that answers each connection's first request
// with the bytes it is given, then half-closes and waits for the client to
// close.
type streamPeer struct {
	l     net.Listener
	reply chan []byte
	done  chan error
}

func newStreamPeer(tb testing.TB) *streamPeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return &streamPeer{l: l, reply: make(chan []byte, 1), done: make(chan error, 1)}
}

// serveOne accepts one connection and plays the peer on it (in its own
// goroutine, ended by the time done has its result).
func (p *streamPeer) serveOne(data []byte) {
	go func() {
		p.done <- func() error {
			nc, err := p.l.Accept()
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := nc.SetDeadline(time.Now().Add(streamTimeout)); err != nil {
				return err
			}
			var hdr [exchange.HeaderSize]byte
			if _, err := io.ReadFull(nc, hdr[:]); err != nil {
				return err
			}
			h, err := exchange.ParseHeader(hdr[:])
			if err != nil {
				return err
			}
			if _, err := io.CopyN(io.Discard, nc, int64(h.Length)); err != nil {
				return err
			}
			if _, err := nc.Write(data); err != nil {
				return nil // the client closed first: it may, on bad bytes
			}
			_ = nc.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, nc) // until the client closes
			return nil
		}()
	}()
}

// FuzzClientStream answers a client's call with arbitrary bytes: the call
// must end within its timeout with an answer or an error (never hang or
// panic), and once the client is closed it holds no call and no byte of
// its reply budget.
func FuzzClientStream(f *testing.F) {
	ok := exchange.Header{Serializer: 27, Status: status.OK, ID: 1}
	f.Add(responseFrame(ok, "hello"))
	f.Add(append(responseFrame(exchange.Header{Event: true, Request: true, TwoWay: true, ID: 9}, ""), responseFrame(ok, "x")...))
	f.Add(responseFrame(exchange.Header{Event: true, Request: true, ID: 9}, "R"))
	f.Add(responseFrame(exchange.Header{Status: status.ServiceNotFound, ID: 1}, "no such service"))
	f.Add(append(responseFrame(exchange.Header{ID: 77}, "stray"), responseFrame(ok, "late")...))
	f.Add(responseFrame(ok, "cut short")[:exchange.HeaderSize+3])
	big := responseFrame(ok, "")
	big[12], big[13], big[14], big[15] = 0x00, 0x10, 0x00, 0x00 // 1 MiB declared, over MaxPayload
	f.Add(big)
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))

	peer := newStreamPeer(f)
	budget := transport.NewBudget(1 << 20)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		clientStreamOnce(t, peer, budget, data)
	})
}

// clientStreamOnce dials peer, calls once and has the peer answer data;
// it returns the answer's body, or the call's error.
func clientStreamOnce(t testing.TB, peer *streamPeer, budget *transport.Budget, data []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	peer.serveOne(data)
	c, err := exchange.Dial(ctx, peer.l.Addr().String(), &exchange.Options{MaxPayload: 64 << 10, ReplyBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	var body string
	start := time.Now()
	resp, err := c.Call(ctx, streamTimeout, 27, request("ping"))
	if err == nil {
		body = string(exchange.Body(resp))
		resp.Release()
	} else if ctx.Err() != nil || time.Since(start) >= streamTimeout {
		// Not errors.Is(err, status.ErrTimeout): a peer may answer
		// with a timeout status (testdata/fuzz/FuzzClientStream).
		t.Fatalf("the call neither got an answer nor failed: %v", err)
	}
	c.Close()
	if err := <-peer.done; err != nil {
		t.Fatalf("peer: %v", err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d calls pending after Close", n)
	}
	if n := budget.Used(); n != 0 {
		t.Fatalf("%d bytes of the reply budget held after Close", n)
	}
	return body, err
}

// TestClientStreamAnswers: the harness of FuzzClientStream reaches the
// client's reader: an answer with the call's id completes it, a stray one
// and a heartbeat before it do not get in its way, and bytes that are not
// frames fail the call.
func TestClientStreamAnswers(t *testing.T) {
	peer := newStreamPeer(t)
	budget := transport.NewBudget(1 << 20)
	ok := exchange.Header{Serializer: 27, Status: status.OK, ID: 1}
	got, err := clientStreamOnce(t, peer, budget, responseFrame(ok, "hello"))
	if err != nil || got != "hello" {
		t.Fatalf("answer: %q, %v", got, err)
	}
	hb := responseFrame(exchange.Header{Event: true, Request: true, TwoWay: true, ID: 9}, "")
	stray := responseFrame(exchange.Header{ID: 77}, "stray")
	got, err = clientStreamOnce(t, peer, budget, append(append(hb, stray...), responseFrame(ok, "after")...))
	if err != nil || got != "after" {
		t.Fatalf("after a heartbeat and a stray answer: %q, %v", got, err)
	}
	if _, err = clientStreamOnce(t, peer, budget, []byte("HTTP/1.1 400 Bad Request\r\n\r\n")); !errors.Is(err, status.ErrConnLost) {
		t.Fatalf("bytes that are not frames: %v, want %v", err, status.ErrConnLost)
	}
}
