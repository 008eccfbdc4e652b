package transport

import (
	"strings"
	"sync"
	"sync/atomic"
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

	// loan, when set, is what the spliced bytes are borrowed under
	// (Lend), in its generation gen.
	loan *Loan
	gen  uint64

	// held is released with this buffer (Hold).
	held *Buffer

	// charge is what the frame counts against its connection's MaxQueue
	// while it waits to be written (its footprint when it was queued).
	charge int

	// acct, when set, is the connection whose memory budget the frame
	// is charged to, owed bytes, until it is released (budget.go).
	acct *Conn
	owed int
}

// frameOverhead is the memory of a queued frame besides its arrays: the
// Buffer and its slot in a queue.
const frameOverhead = int(unsafe.Sizeof(Buffer{})) + 16

// footprint is the memory b keeps while it waits to be written: its array
// whole (a small frame in a pooled buffer keeps all of the buffer's
// capacity), its spliced bytes, a buffer it holds, and the Buffer itself.
// A peer that never reads gets its answers queued up to MaxQueue, and
// counting only the bytes to write let a flood of small answers keep
// twenty times MaxQueue in memory.
func (b *Buffer) footprint() int {
	n := cap(b.B) + b.spliced + frameOverhead
	if b.held != nil {
		n += cap(b.held.B) + frameOverhead
	}
	return n
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
	if b.acct != nil {
		b.acct.unbill(b.owed)
		b.acct, b.owed = nil, 0
	}
	b.endLoan()
	if b.parts != nil {
		b.dropParts()
	}
	if cap(b.B) > maxPooled {
		b.B = nil
	}
	held := b.held
	b.held = nil
	buffers.Put(b)
	if held != nil {
		held.Release()
	}
}

// Hold makes b keep o, and take ownership of it, until b is released:
// b's Release releases o too. A frame to send whose spliced bytes lie in
// another pooled buffer (a response that sends bytes of the request it
// answers) holds that buffer, so that it goes back to the pool, to be
// read into again, only once the frame has been written or dropped. A
// buffer holds one other at most: holding another releases the first.
func (b *Buffer) Hold(o *Buffer) {
	if b.held != nil {
		b.held.Release()
	}
	b.held = o
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

// A Loan lets the sender of a frame with spliced bytes (Buffer.Splice)
// take them back before the frame is written: a caller that must be able
// to reuse its memory as soon as its call returns (early too: a timeout,
// a cancelled context, a lost connection) lends the bytes under a Loan
// (Buffer.Lend) and calls Settle before it returns. After Settle the
// connection never reads the borrowed bytes again: the frame was
// written, or dropped, or it is withdrawn (never written, not a byte of
// it), or the connection copied what it had not written yet into its own
// memory. The writer never waits on the network while it holds borrowed
// bytes (it copies the rest instead), so Settle waits only for work on
// the CPU: the writer gathering its batch (up to about 1 MiB), its
// writes that do not wait for the socket, and the copy of what they
// did not take.
//
// A Loan may be reused for another frame once Settle has returned; the
// zero value is ready. It must not be copied after first use.
type Loan struct {
	// state is gen<<2 | phase. gen counts the frames lent under the
	// Loan, so a frame of an earlier generation (withdrawn, still in a
	// queue) never changes a later one's phase.
	state atomic.Uint64
	wait  chan struct{} // made by Settle when it must wait; 1 slot
}

// Phases of a Loan's frame.
const (
	loanDone    = 0 // written, dropped or withdrawn: nothing borrowed
	loanQueued  = 1 // lent; the connection has not taken it
	loanTaken   = 2 // a writer reads the borrowed bytes
	loanWaiting = 3 // taken, and Settle waits for the end
	loanPhase   = 3
)

// Lend marks b's spliced bytes as borrowed under l until l's Settle (or
// b's Release): see Loan. l must be settled (or new). Only a frame with
// spliced bytes needs it; a frame is lent once.
func (b *Buffer) Lend(l *Loan) {
	gen := l.state.Load()>>2 + 1
	b.loan, b.gen = l, gen
	l.state.Store(gen<<2 | loanQueued)
}

// Lent reports whether b's spliced bytes are borrowed (Lend): whoever
// writes b must take it first (take) and end the loan before it waits
// for the network.
func (b *Buffer) Lent() bool { return b.loan != nil }

// take claims a lent frame for writing; false means that its lender
// withdrew it: it must not be written at all, only released. A frame
// that is not lent is always taken.
func (b *Buffer) take() bool {
	if b.loan == nil {
		return true
	}
	if b.loan.state.CompareAndSwap(b.gen<<2|loanQueued, b.gen<<2|loanTaken) {
		return true
	}
	// Withdrawn: the lender has its bytes back, and its Loan may be
	// another frame's by now. Only Release may follow.
	b.loan = nil
	return false
}

// own copies b's spliced bytes into B, in place, and ends b's loan: b no
// longer refers to memory it does not own. b must be taken (or not lent).
func (b *Buffer) own() {
	if len(b.parts) > 0 {
		nb := growExact(nil, b.Len())
		nb = b.AppendTo(nb)
		b.dropParts()
		b.B = nb
	}
	b.endLoan()
}

// endLoan ends b's loan, if it has one: its lender may settle.
func (b *Buffer) endLoan() {
	if b.loan != nil {
		b.loan.end(b.gen)
		b.loan = nil
	}
}

// dropParts forgets b's spliced bytes.
func (b *Buffer) dropParts() {
	clear(b.parts)
	b.parts = b.parts[:0]
	b.spliced = 0
}

// Own copies b's spliced bytes into b's own array, so that b refers to no
// memory of its sender's: for a sender that cannot settle a loan (one
// that does not wait for the frame's end). b must not be lent.
func (b *Buffer) Own() {
	if b.loan != nil {
		panic("transport: Own of a lent frame")
	}
	b.own()
}

// end ends generation gen of l, if it is still on: the frame was written
// or dropped. It wakes a waiting Settle.
func (l *Loan) end(gen uint64) {
	for {
		s := l.state.Load()
		if s>>2 != gen || s&loanPhase == loanDone {
			return // withdrawn (and maybe lent again since)
		}
		if l.state.CompareAndSwap(s, gen<<2|loanDone) {
			if s&loanPhase == loanWaiting {
				l.wait <- struct{}{}
			}
			return
		}
	}
}

// Settle returns once the connection no longer reads the bytes lent under
// l: at once, with one atomic load, when the frame has been written or
// dropped; a frame still queued is withdrawn (the writer skips it whole);
// a frame being written is waited for, which never includes a wait for
// the socket (see Loan). Only the lender calls it, once per Lend.
func (l *Loan) Settle() {
	s := l.state.Load()
	if s&loanPhase == loanDone {
		return
	}
	l.settleSlow(s)
}

func (l *Loan) settleSlow(s uint64) {
	gen := s >> 2
	for {
		switch s & loanPhase {
		case loanDone:
			return
		case loanQueued:
			if l.state.CompareAndSwap(s, gen<<2|loanDone) {
				return // withdrawn
			}
		case loanTaken:
			if l.wait == nil {
				l.wait = make(chan struct{}, 1)
			}
			if l.state.CompareAndSwap(s, gen<<2|loanWaiting) {
				<-l.wait
				return
			}
		}
		s = l.state.Load()
	}
}
