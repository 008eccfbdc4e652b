package exchange_test

import (
	"testing"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/status"
)

// FuzzParseHeader: any 16 bytes either fail to parse or round-trip.
func FuzzParseHeader(f *testing.F) {
	for _, h := range []exchange.Header{
		{Request: true, TwoWay: true, Serializer: 27, ID: 1, Length: 581},
		{Event: true, Status: status.OK, ID: 9},
		{Status: status.ServiceNotFound, Serializer: 16, ID: 3, Length: 40},
	} {
		var b [exchange.HeaderSize]byte
		h.Put(b[:])
		f.Add(b[:])
	}
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := exchange.ParseHeader(data)
		if err != nil {
			return
		}
		var b [exchange.HeaderSize]byte
		h.Put(b[:])
		h2, err := exchange.ParseHeader(b[:])
		if err != nil || h2 != h {
			t.Fatalf("round trip: %+v -> %+v (%v)", h, h2, err)
		}
		if string(b[:]) != string(data[:exchange.HeaderSize]) {
			t.Fatalf("re-encoded % x, want % x", b, data[:exchange.HeaderSize])
		}
	})
}
