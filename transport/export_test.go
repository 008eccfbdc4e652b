package transport

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/internal/readhook"
)

// WriterWrites returns how many writes c's writer goroutine made.
func WriterWrites(c *Conn) uint64 { return c.writerWrites.Load() }

// WriteAll writes bufs to nc as c's writer goroutine writes a batch.
func WriteAll(nc net.Conn, bufs [][]byte) error {
	b := net.Buffers(bufs)
	return writeBuffers(newDirectWrite(nc), nc, &b)
}

// NewSocketReader returns what a Conn's read loop would read nc with.
func NewSocketReader(nc net.Conn) io.Reader { return newReader(nc) }

// LaterWrites returns how many writes of SendLater's frames c's reading
// role made.
func LaterWrites(c *Conn) uint64 { return c.laterWrites.Load() }

// LaterSplit is the least number of frames SendLater writes before the
// read is used up.
const LaterSplit = laterSplit

// DirectWrites returns how many writes WriteNow (and SendNow) made on c.
func DirectWrites(c *Conn) uint64 { return c.directWrites.Load() }

// LoanPhase names the phase of l's frame: "done", "queued", "taken" or
// "waiting".
func LoanPhase(l *Loan) string {
	return [...]string{"done", "queued", "taken", "waiting"}[l.state.Load()&loanPhase]
}

// LentCopies returns how many lent bytes writers copied before waiting
// for room in a socket.
func LentCopies() int64 { return lentCopies.Load() }

// Interrupts returns how many times Interrupt stopped c's reading role.
func Interrupts(c *Conn) uint64 { return c.interrupts.Load() }

// Wakes returns how many times b woke a connection waiting for room, with
// its frame charged.
func Wakes(b *Budget) uint64 { return b.wakes.Load() }

// Reservations returns how many waiters b reserved itself for.
func Reservations(b *Budget) uint64 { return b.reservations.Load() }

// BudgetState says what b holds and who waits in it, for a failed test's
// message.
func BudgetState(b *Budget) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := fmt.Sprintf("used %d waiters %d queue %d reserving %v reserved %v reservations %d;", b.used.Load(), b.waiters.Load(), len(b.queue), b.reserving.Load(), b.reserved != nil, b.reservations.Load())
	now := monoNow()
	for _, w := range b.queue {
		s += fmt.Sprintf(" [need %d small %v age %v pat %v]", w.need, w.small, time.Duration(now-w.since), time.Duration(w.patience))
	}
	return s
}

// OnStuckClosed has f told, until the returned func is called, how many
// peers that took none of their answers each look of a reclaimer closed.
func OnStuckClosed(f func(closed int)) (undo func()) {
	testHookStuckClosed.Store(&f)
	return func() { testHookStuckClosed.Store(nil) }
}

// OnIPTaken has f run, until the returned func is called, on the reading
// role of each frame that took its address's share at once, with its
// size, before the frame is charged to the budget.
func OnIPTaken(f func(need int)) (undo func()) {
	testHookIPTaken.Store(&f)
	return func() { testHookIPTaken.Store(nil) }
}

// IPShares describes the address shares b keeps ("" for none).
func IPShares(b *Budget) string {
	b.ipmu.Lock()
	defer b.ipmu.Unlock()
	s := ""
	for a, sh := range b.ips {
		sh.mu.Lock()
		s += fmt.Sprintf("[%v refs %d inflight %d waiting %d]", a, sh.refs, sh.inflight, len(sh.queue))
		sh.mu.Unlock()
	}
	return s
}

// HoldTakenBytes makes the next read of a connection this process made
// that takes bytes from its socket, where such reads are counted (on
// Linux: plain TCP, and TLS connections Dial made), wait after its
// read(2), before it counts them, until release is called (or t ends);
// held is closed once it waits.
func HoldTakenBytes(t testing.TB) (held <-chan struct{}, release func()) {
	return HoldTakenBytesWhen(t, nil)
}

// HoldTakenBytesWhen is HoldTakenBytes for the first such read after
// which when (nil: any) reports true; when runs in the reader, after the
// read(2).
func HoldTakenBytesWhen(t testing.TB, when func() bool) (held <-chan struct{}, release func()) {
	held, release, undo := readhook.Hold(when)
	t.Cleanup(undo)
	return held, release
}
