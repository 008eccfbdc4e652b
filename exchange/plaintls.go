package exchange

import "github.com/minidubbo/minidubbo/status"

// PlainOnTLSMessage is the message of the status.BadRequest answer a TLS
// server sends to a request that came in plain TCP, before it closes the
// connection.
const PlainOnTLSMessage = "this provider port speaks TLS and the request came in plain TCP: configure TLS on the consumer"

// plainOnTLS answers the request whose header is b, sent in plain TCP to a
// TLS port, with status.BadRequest and PlainOnTLSMessage (see
// transport.Options.PlainOnTLS). Heartbeats and one-way requests get
// nothing.
func plainOnTLS(b []byte) []byte {
	h, err := ParseHeader(b)
	if err != nil || !h.Request || !h.TwoWay || h.Event {
		return nil
	}
	f := make([]byte, HeaderSize, HeaderSize+len(PlainOnTLSMessage))
	f = append(f, PlainOnTLSMessage...)
	r := Header{Serializer: h.Serializer, Status: status.BadRequest, ID: h.ID, Length: uint32(len(PlainOnTLSMessage))}
	r.Put(f)
	return f
}
