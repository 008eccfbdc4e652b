package exchange

import (
	"encoding/binary"
	"fmt"

	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// Header layout (DESIGN.md, "Wire format").
const (
	// HeaderSize is the length of the frame header.
	HeaderSize = transport.HeaderSize
	// Magic starts every frame.
	Magic = transport.Magic

	flagRequest    = 0x80
	flagTwoWay     = 0x40
	flagEvent      = 0x20
	serializerMask = 0x1f
)

// Header is the decoded 16-byte frame header.
type Header struct {
	// Request is set on requests, clear on responses.
	Request bool
	// TwoWay is set on requests that expect a response.
	TwoWay bool
	// Event marks heartbeats and the read-only announcement.
	Event bool
	// Serializer is the serialization id of the body (0-31).
	Serializer byte
	// Status is the status of a response (0 in requests).
	Status status.Code
	// ID matches a response to its request.
	ID uint64
	// Length is the body length.
	Length uint32
}

// Put writes h into b[:HeaderSize].
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint16(b[0:2], Magic)
	flags := h.Serializer & serializerMask
	if h.Request {
		flags |= flagRequest
	}
	if h.TwoWay {
		flags |= flagTwoWay
	}
	if h.Event {
		flags |= flagEvent
	}
	b[2] = flags
	b[3] = byte(h.Status)
	binary.BigEndian.PutUint64(b[4:12], h.ID)
	binary.BigEndian.PutUint32(b[12:16], h.Length)
}

// ParseHeader decodes the header at the start of b. It is an error if b is
// shorter than HeaderSize or does not start with Magic.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("exchange: header of %d bytes, want %d", len(b), HeaderSize)
	}
	if m := binary.BigEndian.Uint16(b[0:2]); m != Magic {
		return Header{}, fmt.Errorf("exchange: bad magic %#04x", m)
	}
	flags := b[2]
	return Header{
		Request:    flags&flagRequest != 0,
		TwoWay:     flags&flagTwoWay != 0,
		Event:      flags&flagEvent != 0,
		Serializer: flags & serializerMask,
		Status:     status.Code(b[3]),
		ID:         binary.BigEndian.Uint64(b[4:12]),
		Length:     binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// NewFrame returns a pooled buffer holding HeaderSize zero bytes, to which
// the caller appends a body before handing it to Client.Call or returning it
// from a Handler; the header is filled in then.
func NewFrame() *transport.Buffer {
	f := transport.GetBuffer()
	f.B = append(f.B, zeroHeader[:]...)
	return f
}

var zeroHeader [HeaderSize]byte

// Body returns the body of frame f (everything after the header) in B;
// a frame to send with spliced bytes (transport.Buffer.Splice) has
// BodyLen bytes of body, not all of them in B.
func Body(f *transport.Buffer) []byte { return f.B[HeaderSize:] }

// BodyLen returns the length of f's body, spliced bytes included.
func BodyLen(f *transport.Buffer) int { return f.Len() - HeaderSize }
