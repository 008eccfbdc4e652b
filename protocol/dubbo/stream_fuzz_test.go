package dubbo

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
)

// streamTimeout bounds each wait of FuzzProviderStream: a connection that
// neither answers nor closes within it is a failure.
const streamTimeout = 20 * time.Second

// frameOf is a frame with header h (its Length set) and body.
func frameOf(h exchange.Header, body []byte) []byte {
	h.Length = uint32(len(body))
	b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
	h.Put(b)
	return append(b, body...)
}

// FuzzProviderStream writes arbitrary bytes to a real provider connection
// (the dubbo provider's handler behind an exchange server on 127.0.0.1):
// the server must answer with well-formed response frames, each for a
// two-way request the bytes held, and close the connection when the bytes
// end or go wrong; afterwards no connection, request or byte of the
// memory budget is left held.
func FuzzProviderStream(f *testing.F) {
	req := exchange.Header{Request: true, TwoWay: true, Serializer: serialize.MsgpackID, ID: 1}
	call := frameOf(req, fuzzRequest(f, "M", "s", fuzzArg{Name: "n", Tags: []string{"t"}}, []int64{1, 2}))
	hb := frameOf(exchange.Header{Request: true, TwoWay: true, Event: true, ID: 7}, []byte{0xc0})
	oneway := frameOf(exchange.Header{Request: true, Serializer: serialize.MsgpackID, ID: 2}, fuzzRequest(f, "Any", 1))
	second := req
	second.ID = 3
	f.Add(call)
	f.Add(append(append(append([]byte(nil), hb...), oneway...), frameOf(second, fuzzRequest(f, "Nope"))...))
	f.Add(frameOf(exchange.Header{Request: true, TwoWay: true, Serializer: 99, ID: 4}, []byte{0x01}))
	f.Add(frameOf(exchange.Header{Serializer: serialize.MsgpackID, ID: 5}, []byte{0xc0}))     // a response sent to a server
	f.Add(append(frameOf(req, nil)[:exchange.HeaderSize-4], 0x7f, 0xff, 0xff, 0xff, 1, 2, 3)) // 2 GiB declared
	f.Add(call[:len(call)-3])                                                                 // cut mid-body
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))

	es, addr := streamProvider(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		streamOnce(t, es, addr, data)
	})
}

// streamProvider is the provider FuzzProviderStream writes to: the dubbo
// handler of fuzzServer behind an exchange server on 127.0.0.1, closed at
// the end of the test.
func streamProvider(tb testing.TB) (*exchange.Server, string) {
	s := fuzzServer(tb)
	es, err := exchange.NewServer(s, &exchange.Options{MaxPayload: 64 << 10, MaxMemory: 1 << 20, FrameTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = es.Serve(l)
	}()
	tb.Cleanup(func() {
		es.Close()
		<-served
		s.p.Close()
	})
	return es, l.Addr().String()
}

// streamOnce writes data on a new connection to addr, half-closes it and
// reads until the server closes: it checks the answers (checkAnswers),
// that the server closed within streamTimeout, and that afterwards es holds
// no connection, request or budget byte. It returns what the server sent.
func streamOnce(t testing.TB, es *exchange.Server, addr string, data []byte) []byte {
	nc, err := net.DialTimeout("tcp", addr, streamTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(streamTimeout)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := nc.Write(data)
		if err == nil {
			err = nc.(*net.TCPConn).CloseWrite()
		}
		wrote <- err
	}()
	out, err := io.ReadAll(nc)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the provider neither answered nor closed: %v after %d bytes", err, len(out))
	}
	if err := <-wrote; err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write: %v", err)
	}
	checkAnswers(t, data, out)
	deadline := time.Now().Add(streamTimeout)
	for es.Conns() != 0 || es.Held() != 0 || es.Budget().Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the connection closed: %d connections, %d requests, %d budget bytes held",
				es.Conns(), es.Held(), es.Budget().Used())
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded by deadline
	}
	return out
}

// TestProviderStreamAnswers: the harness of FuzzProviderStream reaches the
// provider's methods: a call is answered OK, a heartbeat with an event
// or nothing, and a response sent to the server with nothing.
func TestProviderStreamAnswers(t *testing.T) {
	es, addr := streamProvider(t)
	req := exchange.Header{Request: true, TwoWay: true, Serializer: serialize.MsgpackID, ID: 41}
	out := streamOnce(t, es, addr, frameOf(req, fuzzRequest(t, "M", "s", fuzzArg{Name: "n"}, []int64{1, 2})))
	h, err := exchange.ParseHeader(out)
	if err != nil || h.ID != 41 || h.Status != status.OK || h.Event || int(h.Length) != len(out)-exchange.HeaderSize {
		t.Fatalf("call: %+v %v (%d bytes)", h, err, len(out))
	}
	// The heartbeat's answer is queued, and the connection's end (read
	// right after) may close it first: an answer or none.
	out = streamOnce(t, es, addr, frameOf(exchange.Header{Request: true, TwoWay: true, Event: true, ID: 42}, []byte{0xc0}))
	if h, err = exchange.ParseHeader(out); len(out) > 0 && (err != nil || h.ID != 42 || !h.Event || h.Request) {
		t.Fatalf("heartbeat: %+v %v", h, err)
	}
	if out = streamOnce(t, es, addr, frameOf(exchange.Header{ID: 43}, []byte{0xc0})); len(out) != 0 {
		t.Fatalf("a response sent to the server was answered: % x", out)
	}
}

// checkAnswers checks that out is whole frames from a server: responses
// to two-way requests of in (by ID, at most one each), or its heartbeats.
func checkAnswers(t testing.TB, in, out []byte) {
	twoWay := map[uint64]int{}
	for b := in; len(b) >= exchange.HeaderSize; {
		h, err := exchange.ParseHeader(b)
		if err != nil {
			break
		}
		if h.Request && h.TwoWay {
			twoWay[h.ID]++
		}
		if uint64(len(b)) < exchange.HeaderSize+uint64(h.Length) {
			break
		}
		b = b[exchange.HeaderSize+int(h.Length):]
	}
	for b := out; len(b) > 0; {
		h, err := exchange.ParseHeader(b)
		if err != nil {
			t.Fatalf("the provider sent a bad frame: %v (% x)", err, b[:min(len(b), exchange.HeaderSize)])
		}
		if uint64(len(b)) < exchange.HeaderSize+uint64(h.Length) {
			t.Fatalf("the provider sent a frame cut short: %+v, %d bytes", h, len(b))
		}
		b = b[exchange.HeaderSize+int(h.Length):]
		if h.Request {
			if !h.Event {
				t.Fatalf("the provider sent a request: %+v", h)
			}
			continue // its heartbeat or read-only event
		}
		if twoWay[h.ID] == 0 {
			t.Fatalf("the provider answered id %d, not a two-way request of the input (%v)", h.ID, twoWay)
		}
		twoWay[h.ID]--
	}
}
