package transport

import "sync"

// maxPooled is the largest buffer capacity kept for reuse.
const maxPooled = 64 << 10

// Buffer is a frame buffer from a pool. Whoever holds it releases it
// exactly once: Conn.Send takes ownership of the buffers it is given, and
// the Handler owns the buffers it is served.
type Buffer struct {
	B []byte
}

var buffers = sync.Pool{New: func() any { return &Buffer{B: make([]byte, 0, 1024)} }}

// GetBuffer returns an empty buffer from the pool.
func GetBuffer() *Buffer {
	b := buffers.Get().(*Buffer)
	b.B = b.B[:0]
	return b
}

// Release returns b to the pool; b must not be used after.
func (b *Buffer) Release() {
	if cap(b.B) > maxPooled {
		return
	}
	buffers.Put(b)
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
