package transport

import (
	"strings"
	"sync"
	"unsafe"
)

// maxPooled is the largest buffer capacity kept for reuse.
const maxPooled = 64 << 10

// Buffer is a frame buffer from a pool. Whoever holds it releases it
// exactly once: Conn.Send takes ownership of the buffers it is given, and
// the Handler owns the buffers it is served.
//
// A frame to send may also refer to byte slices it does not copy (Splice):
// its bytes are then B's with the spliced slices inserted where B ended
// when each was spliced.
type Buffer struct {
	B []byte

	parts   []part // spliced slices, in order
	spliced int    // their total length
}

// part is a slice spliced into a frame after B[:at].
type part struct {
	at int
	p  []byte
}

// buffers holds Buffers, most with an array (nil B: its array was too
// large to pool).
var buffers = sync.Pool{New: func() any { return new(Buffer) }}

// GetBuffer returns an empty buffer from the pool.
func GetBuffer() *Buffer {
	b := buffers.Get().(*Buffer)
	if b.B == nil {
		b.B = make([]byte, 0, 1024)
	} else {
		b.B = b.B[:0]
	}
	return b
}

// getReadBuffer returns an empty buffer from the pool with room for n
// bytes, for a frame read from the network: new memory of exactly n
// bytes (not zeroed from noZeroMin on, see growExact) when the pooled
// array is too small.
func getReadBuffer(n int) *Buffer {
	b := buffers.Get().(*Buffer)
	b.B = growExact(b.B[:0], n)
	return b
}

// Release returns b to the pool; b must not be used after. An array over
// maxPooled bytes is left to the garbage collector.
func (b *Buffer) Release() {
	if b.parts != nil {
		clear(b.parts)
		b.parts = b.parts[:0]
		b.spliced = 0
	}
	if cap(b.B) > maxPooled {
		b.B = nil
	}
	buffers.Put(b)
}

// Splice adds p to the frame without copying it: p's bytes follow B's
// bytes as they are now, and what is appended to B afterwards follows p.
// The frame refers to p until it is written or dropped, after the Conn
// it was sent on has taken it, so p must not be modified until then (a
// sender that cannot know when that is must not splice what it will
// modify). Only frames to send may have spliced bytes: Conn.Send and its
// variants write them; B alone is what a Handler is served.
func (b *Buffer) Splice(p []byte) {
	if len(p) == 0 {
		return
	}
	b.parts = append(b.parts, part{at: len(b.B), p: p})
	b.spliced += len(p)
}

// Len returns the frame's length: B's bytes and the spliced ones.
func (b *Buffer) Len() int { return len(b.B) + b.spliced }

// Spliced reports whether b has spliced bytes.
func (b *Buffer) Spliced() bool { return len(b.parts) > 0 }

// AppendTo appends the frame's bytes, spliced ones included, to dst.
func (b *Buffer) AppendTo(dst []byte) []byte {
	b.segments(func(p []byte) { dst = append(dst, p...) })
	return dst
}

// segments calls fn for the frame's non-empty pieces, in order.
func (b *Buffer) segments(fn func([]byte)) {
	at := 0
	for _, s := range b.parts {
		if s.at > at {
			fn(b.B[at:s.at])
		}
		fn(s.p)
		at = s.at
	}
	if len(b.B) > at {
		fn(b.B[at:])
	}
}

// Grow makes room in B for at least n more bytes, allocating at most
// once; from noZeroMin bytes on, the new memory is not zeroed first (it
// is B's spare capacity, which only appends reach).
func (b *Buffer) Grow(n int) {
	if n > cap(b.B)-len(b.B) {
		b.B = growExact(b.B, len(b.B)+n)
	}
}

// Write appends p to b; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.B = append(b.B, p...)
	return len(p), nil
}

// WriteString appends s to b; it never fails.
func (b *Buffer) WriteString(s string) (int, error) {
	b.B = append(b.B, s...)
	return len(s), nil
}

// WriteByte appends c to b; it never fails.
func (b *Buffer) WriteByte(c byte) error {
	b.B = append(b.B, c)
	return nil
}

// noZeroMin is the capacity from which growExact takes memory that is not
// zeroed first.
const noZeroMin = 4 << 10

// makeNoZero returns an empty slice with room for n bytes whose memory is
// not zeroed first: it holds whatever the allocator left there, so the
// caller must write every byte it later exposes. A large frame is read
// from the network into new memory when the pool has no buffer big
// enough, and zeroing it first would write the whole frame twice. strings.Builder is the standard library's way to get
// such memory; the builder's array is taken over, not its string.
func makeNoZero(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0)
	s := sb.String()
	return unsafe.Slice(unsafe.StringData(s), n)[:0:n]
}
