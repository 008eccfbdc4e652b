package transport

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxMemory is the default of Options.MaxMemory: the memory the
// frames of a Server's connections may hold, read or queued to write,
// before the Server stops reading (but never less than twice MaxPayload,
// so that every frame MaxPayload allows fits).
const DefaultMaxMemory = 256 << 20

// smallFrame is the largest frame (header included) that a connection
// holding no frame may read while the budget is used up: a caller whose
// calls are small and answered gets them read one at a time even then.
const smallFrame = 4 << 10

// A Budget bounds the memory that frames hold across the connections of
// one Server, or of several Servers of a process that share it
// (Options.Budget): the frames read, from their first body byte until
// whoever was served them releases them (requests waiting for a worker
// and running included), and the frames queued to write, until written.
// The connections' own read and write buffers (Options.ReadBufferSize,
// WriteBufferSize, taken only while data flows) are not counted: MaxConns
// bounds them.
//
// A frame is charged whole when its header has been read, before its body
// is read or allocated: when it does not fit, the connection stops reading
// (the peer's writes wait in TCP) until frames held elsewhere are released,
// so a frame never waits half read and nothing deadlocks on the budget.
// A release wakes only the waiting connections whose frames now fit,
// smallest frame first (with the room a frame over its address's fair
// share must leave, see below; equal ones in the order they began to
// wait), with their frames charged already; the others sleep on. A
// waiting frame is never stuck behind a larger one that does not fit.
// A frame that has
// waited a tenth of its connection's FrameTimeout may get the budget
// reserved (one at a time, the one waiting longest): until it fits, no
// other frame over 4 KiB is charged, so a large frame is not passed over
// for as long as smaller ones keep coming (frames of up to 4 KiB, such
// as heartbeats, still are when they fit, up to a sixty-fourth of the
// limit, 64 KiB at least, during one reservation: then they wait too,
// else a stream of them would take every room a release makes). A frame
// whose connection's peer is a connection this process made (its own
// call of a service of its own: see selfcall.go) passes a reservation
// when it fits, since the reserved frame may wait for the memory of the
// handler that makes the call. A
// connection that holds no frame at all may still read a frame of up to
// 4 KiB while the budget is used up, so that callers with small calls
// progress one call at a time while the connections that hold the memory
// wait. Frames queued to write are charged and never wait (a worker must
// be able to answer): they go over the limit, and the connections wait to
// read until they are written. A frame larger than the whole budget is
// refused (ErrFrameTooLarge) and its connection closed.
//
// While connections wait for room, the budget closes the connections
// that hold memory without their peers doing their part, and counts them
// (Reclaimed): a frame in progress far behind the pace its FrameTimeout
// implies (half its declared length per FrameTimeout, after a tenth of
// FrameTimeout, with 64 KiB of slack, so never a frame of up to 128 KiB,
// which FrameTimeout and MaxMemoryPerIP bound: a frame is charged whole from its
// header on, so a peer that declared large frames and sent little would
// otherwise hold that much until FrameTimeout, for the price of a
// header), closed with ErrSlowFrame; and a connection with answers queued
// whose peer took none of them for FrameTimeout, the one holding the
// most first, and more while the first waiting frame still would not
// fit, closed with ErrSlowPeer (a peer that never reads, and a client
// that writes a batch of requests before it reads any answer, whose next
// request would otherwise wait for ever for its own answers to be
// written). It looks every twentieth of the shortest FrameTimeout, and
// only while connections wait.
//
// The frames in progress (over 4 KiB, their bodies still arriving) of
// the connections from one remote IP address may hold at most
// Options.MaxMemoryPerIP of it (by default an eighth): a frame that would
// go over waits unread, nothing charged, until that address's frames in
// progress end (ThrottledByIP), so peers that declare large frames and
// reconnect each time they are closed hold at most that much per
// address; the reclaimer looks while such frames wait too. And a frame
// whose address's frames in progress (it included) are over the
// address's fair share, the limit over the number of addresses busy
// (with frames in progress, or waiting to begin one) and one more, at
// most the addresses with connections, is charged only while it leaves a
// fair share free (as reckoned again whenever its address's frames in
// progress change), and waits behind frames of the same size of
// addresses under theirs (a reservation for it holds back only frames of
// addresses over their share, for its FrameTimeout, then every frame as
// any reservation): so 8 addresses or more that declare large frames
// leave room for an address with little in progress, which does not wait
// for the reclaimer to cut them. Idle addresses do not count: an address
// busy alone has the whole budget (the first frame of another then waits
// for what it holds as for any frames that hold the budget). On a budget
// given to Dial, the share is a peer's (address and port), and the limit
// is over the peers connected, idle or not: a consumer's providers may
// each answer any time (no MaxMemoryPerIP bound there).
//
// So the memory held stays under the limit, plus what answers queued
// while it was reached, plus up to 4 KiB and an answer per connection.
//
// A Budget is safe for concurrent use.
type Budget struct {
	limit   int64
	used    atomic.Int64
	waiters atomic.Int32 // connections in budgetWait
	// reserving is set while reserved (under mu) is a waiter that
	// waited too long: nothing else is charged a frame that waits
	// until it fits. reservingOver is set instead when the reserved
	// frame's address is over its fair share (room > 0): only the
	// frames of such addresses wait for it.
	reserving     atomic.Bool
	reservingOver atomic.Bool
	throttled     atomic.Uint64
	wakes         atomic.Uint64 // waiters woken with room granted (tests)
	// reservations counts the waiters reserved for (tests).
	reservations atomic.Uint64
	// smallSpent is what frames of up to 4 KiB were charged since the
	// reservation under way began (smallCap bounds it).
	smallSpent atomic.Int64
	reclaimed  atomic.Uint64

	// The shares of the remote IP addresses (perip.go; of the peers'
	// addresses and ports, for a Dial's budget): ipmu guards ips and the
	// shares' refs; ipWaiting counts the connections waiting for room in
	// theirs.
	ipmu  sync.Mutex
	ips   map[netip.AddrPort]*ipShare
	nips  atomic.Int32 // len(ips): the addresses with connections
	nbusy atomic.Int32 // the shares busy (ipShare.busy)
	// refitDue: the number of busy shares changed while frames waited;
	// the reclaimer's next look reckons their room again (refit).
	refitDue    atomic.Bool
	ipWaiting   atomic.Int32
	ipThrottled atomic.Uint64
	// cut: the providers (a Dial's budget) whose frame the reclaimer
	// cut, until when they are marked (monoNow; markCut, perip.go).
	cutmu sync.Mutex
	cut   map[netip.AddrPort]int64

	// role is what the budget was first used for (roleServer,
	// roleDialed): a budget is never both (claim).
	role atomic.Int32

	// The reclaimer's state (reclaim.go).
	cmu sync.Mutex
	rc  reclaimer

	// The connections waiting for room, smallest frame first: a release
	// wakes only those it makes room for, with their frames charged
	// already (grant), not every waiting connection (which made each
	// release cost a wake-up per throttled connection).
	mu       sync.Mutex
	queue    waitHeap
	selfQd   int    // waiters in queue with self set
	seq      uint64 // order of arrival, among equal frames
	reserved *budgetWaiter
}

// budgetWaiter is a connection's place in its budget's queue (Conn.bw).
// Its fields other than wake are guarded by the budget's mu.
type budgetWaiter struct {
	need int64 // the frame's charge
	// room is what must stay free of the budget when it is charged:
	// its address is over its fair share (perip.go); 0 otherwise.
	room int64
	// ip is its address's share when the frame is one of its frames in
	// progress (nil otherwise): room is reckoned again from what they
	// hold (ipShare.live) when it changes, and when the number of
	// addresses does (refit).
	ip *ipShare
	// reservedAt (monoNow) is when it was reserved for; a reservation
	// for it while its address is over its fair share becomes a whole
	// one (its room 0, kept: whole) after its FrameTimeout.
	reservedAt int64
	whole      bool
	// self: its connection's peer is a connection of this process
	// (selfcall.go), asked when a reservation is under way: it passes
	// reservations.
	self    bool
	small   bool // the frame may be read once its connection holds nothing
	queued  bool
	granted bool // need was charged for it, and it was taken off the queue
	seq     uint64
	index   int           // in the queue
	wake    chan struct{} // 1 slot: signalled when taken off the queue by another
	// held is its connection's (Conn.held): a small frame may be read
	// once it is zero.
	held *atomic.Int64
	// since (monoNow) is when the frame began to wait; after patience
	// (a tenth of its connection's FrameTimeout) the reclaimer may
	// reserve the budget for it.
	since, patience int64
}

// fit is the room w needs free to be charged: its frame, and what must
// stay free besides when its address is over its fair share.
func (w *budgetWaiter) fit() int64 { return w.need + w.room }

// waitHeap orders waiters by fit, then by arrival (container/heap): a
// frame whose address is over its fair share waits behind the frames of
// the same size of addresses under theirs.
type waitHeap []*budgetWaiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	fi, fj := h[i].fit(), h[j].fit()
	return fi < fj || fi == fj && h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*budgetWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

// NewBudget returns a budget of limit bytes; limit <= 0 means
// DefaultMaxMemory.
func NewBudget(limit int) *Budget {
	if limit <= 0 {
		limit = DefaultMaxMemory
	}
	return &Budget{limit: int64(limit)}
}

// Limit returns the budget's limit in bytes.
func (b *Budget) Limit() int { return int(b.limit) }

// Used returns the bytes the budget's frames hold now.
func (b *Budget) Used() int { return int(b.used.Load()) }

// Throttled returns how many times a connection stopped reading because
// the budget was used up.
func (b *Budget) Throttled() uint64 { return b.throttled.Load() }

// tryTake charges n when it fits under the limit with room bytes to
// spare (room: see budgetWaiter).
func (b *Budget) tryTake(n int, room int64) bool {
	for {
		u := b.used.Load()
		if u+int64(n)+room > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+int64(n)) {
			return true
		}
	}
}

// charge charges n whether it fits or not.
func (b *Budget) charge(n int) { b.used.Add(int64(n)) }

// release gives n back and wakes the connections waiting for room that
// now fits.
func (b *Budget) release(n int) {
	b.used.Add(-int64(n))
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		b.grant()
		b.mu.Unlock()
	}
}

// smallCap bounds what frames of up to 4 KiB may be charged during one
// reservation: a sixty-fourth of the limit, at least 64 KiB.
func (b *Budget) smallCap() int64 { return max(b.limit/64, readStep) }

// spendSmall counts n against smallCap, if it fits there.
func (b *Budget) spendSmall(n int) bool {
	if b.smallSpent.Add(int64(n)) <= b.smallCap() {
		return true
	}
	b.smallSpent.Add(-int64(n))
	return false
}

// takeSmall charges a frame of up to 4 KiB during a reservation: when it
// fits both the budget and smallCap.
func (b *Budget) takeSmall(n int) bool {
	if !b.spendSmall(n) {
		return false
	}
	if b.tryTake(n, 0) {
		return true
	}
	b.smallSpent.Add(-int64(n))
	return false
}

// grant charges the frames of the waiters that now fit, smallest fit first,
// and wakes them: the first that does not fit ends it, since the others
// are larger. While a waiter is reserved for, only frames of up to 4 KiB
// (heartbeats, small calls) are granted besides it until it fits, and
// only up to smallCap in all: a stream of them would otherwise take
// every room a release makes, and the reserved frame would never fit.
// A waiter reserved for whose address is over its fair share holds back
// only the frames of addresses over theirs. b.mu is held.
func (b *Budget) grant() {
	if r := b.reserved; r != nil {
		if !b.tryTake(int(r.need), r.room) {
			if r.room > 0 {
				b.grantPassing(true)
				return
			}
			for len(b.queue) > 0 && b.queue[0].need <= smallFrame && b.takeSmall(int(b.queue[0].need)) {
				w := b.queue[0]
				w.granted = true
				b.unqueue(w)
			}
			b.grantPassing(false)
			return
		}
		r.granted = true
		b.unqueue(r) // ends the reservation
	}
	for len(b.queue) > 0 && b.tryTake(int(b.queue[0].need), b.queue[0].room) {
		w := b.queue[0]
		w.granted = true
		b.unqueue(w)
	}
}

// grantPassing grants the waiters that a reservation does not hold back
// and that fit, smallest first: the frames of this process's own calls
// (self), and while the waiter reserved for is of an address over its
// fair share (under), those of addresses under theirs. Waiters that it
// holds back may come first in the queue. b.mu is held.
func (b *Budget) grantPassing(under bool) {
	if !under && b.selfQd == 0 {
		return
	}
	var pass []*budgetWaiter
	for _, w := range b.queue {
		if w.self || under && w.room == 0 {
			pass = append(pass, w)
		}
	}
	slices.SortFunc(pass, func(x, y *budgetWaiter) int {
		return cmp.Or(cmp.Compare(x.need, y.need), cmp.Compare(x.seq, y.seq))
	})
	for _, w := range pass {
		if !b.tryTake(int(w.need), w.room) {
			return
		}
		w.granted = true
		b.unqueue(w)
	}
}

// push queues w. b.mu is held.
func (b *Budget) push(w *budgetWaiter) {
	b.seq++
	w.queued, w.seq = true, b.seq
	if w.self {
		b.selfQd++
	}
	heap.Push(&b.queue, w)
}

// unqueue takes w off the queue and wakes it. b.mu is held.
func (b *Budget) unqueue(w *budgetWaiter) {
	b.remove(w)
	b.wakes.Add(1)
	w.signal()
}

// signal wakes w's connection (w.wake has one slot).
func (w *budgetWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// remove takes w off the queue, and ends a reservation for it. b.mu is
// held.
func (b *Budget) remove(w *budgetWaiter) {
	heap.Remove(&b.queue, w.index)
	w.queued = false
	if w.self {
		b.selfQd--
	}
	if b.reserved == w {
		b.reserved = nil
		b.reserving.Store(false)
		b.reservingOver.Store(false)
		// The small frames of connections that hold nothing, which
		// waited once smallCap was spent, may be read again.
		var idle []*budgetWaiter
		for _, q := range b.queue {
			if q.small && q.held.Load() == 0 {
				idle = append(idle, q)
			}
		}
		for _, q := range idle {
			b.remove(q)
			q.signal()
		}
	}
}

// reserve reserves the budget for the waiter that has waited longest
// past its patience, if no reservation is under way, and grants it if
// it fits: from then on no other frame over 4 KiB is charged until it
// fits (those of up to 4 KiB are when they fit, or when their
// connection holds nothing, so heartbeats and small calls go on), so a
// large frame is not passed over for ever by smaller ones that keep
// coming. A frame whose address is over its fair share (room > 0) is
// reserved for only when no other waits that long, and then holds back
// only the frames of addresses over theirs: the frames of addresses that
// hold much do not make the others wait; after its FrameTimeout so
// reserved, it holds back every frame over 4 KiB and needs no room
// besides (so its wait is bounded as any other's). The reclaimer calls
// it. b.mu is held.
func (b *Budget) reserve(now int64) {
	if r := b.reserved; r != nil {
		if r.room > 0 && now-r.reservedAt >= 10*r.patience {
			// Passed over by frames under their share for its
			// FrameTimeout: now nothing over 4 KiB passes it, so
			// its wait is bounded too.
			r.room, r.whole = 0, true
			heap.Fix(&b.queue, r.index)
			b.reservingOver.Store(false)
			b.smallSpent.Store(0)
			b.reserving.Store(true)
			b.grant()
		}
		return
	}
	var old *budgetWaiter
	for _, w := range b.queue {
		if !w.small && now-w.since >= w.patience && (old == nil || w.room == 0 && old.room > 0 ||
			(w.room == 0) == (old.room == 0) && w.since < old.since) {
			old = w
		}
	}
	if old == nil {
		return
	}
	b.reserved = old
	old.reservedAt = now
	b.smallSpent.Store(0)
	if old.room > 0 {
		b.reservingOver.Store(true)
	} else {
		b.reserving.Store(true)
	}
	b.reservations.Add(1)
	b.grant()
}

// wakeSmall wakes c's waiter if it waits for c to hold nothing (c's held
// just fell to zero).
func (b *Budget) wakeSmall(c *Conn) {
	b.mu.Lock()
	if w := &c.bw; w.queued && w.small {
		b.leave(w)
		w.signal()
	}
	b.mu.Unlock()
}

// leave takes w off the queue without charging it; when it was first,
// or reserved for, others may fit now. b.mu is held.
func (b *Budget) leave(w *budgetWaiter) {
	first := w.index == 0 || b.reserved == w
	b.remove(w)
	if first {
		b.grant()
	}
}

func (b *Budget) done() { b.waiters.Add(-1) }

// A budget's roles: a Server's (its requests) or Dial's (the answers its
// connections read).
const (
	roleServer int32 = 1 + iota
	roleDialed
)

// claim records that b is used in role r, and reports whether it may be:
// a budget is a Server's or Dial's, never both, since a handler that
// calls out while its request holds memory of it would wait for its reply
// to fit in memory its own request holds.
func (b *Budget) claim(r int32) bool {
	return b.role.CompareAndSwap(0, r) || b.role.Load() == r
}

// BudgetLimit returns the limit of the memory budget that a Server with
// options o makes when o.Budget is nil: MaxMemory, or by default
// DefaultMaxMemory or twice MaxPayload (header included), whichever is
// more.
func (o *Options) BudgetLimit() int {
	if o == nil {
		o = &Options{}
	}
	return budgetLimit(o)
}

// budgetLimit is BudgetLimit of options with defaults.
func budgetLimit(o *Options) int {
	if o.MaxMemory > 0 {
		return o.MaxMemory
	}
	payload := o.MaxPayload
	if payload <= 0 {
		payload = DefaultMaxPayload
	}
	// In int64, capped at the largest int: on a 32-bit platform twice a
	// MaxPayload of 1 GiB or more overflows an int.
	return int(min(max(DefaultMaxMemory, 2*(int64(payload)+HeaderSize)), math.MaxInt))
}

// bill charges f's memory to c's budget as a frame queued to write (it
// never waits), unless f is charged already (a frame read and sent
// back). c.mu is held or f is not shared yet.
func (c *Conn) bill(f *Buffer) {
	if c.budget == nil || c.dialed || f.acct != nil {
		return
	}
	n := cap(f.B) + f.spliced + frameOverhead
	f.acct, f.owed = c, n
	c.held.Add(int64(n))
	c.budget.charge(n)
}

// unbill gives back what a frame of c's was charged (Buffer.Release).
func (c *Conn) unbill(n int) {
	if c.held.Add(-int64(n)) == 0 && c.smallWait.Load() {
		c.budget.wakeSmall(c)
	}
	c.budget.release(n)
}

// Throttled reports whether c's reading waits for room in its Server's
// memory budget (Options.MaxMemory): its peer's frames wait unread, as
// when its Handler pauses it.
func (c *Conn) Throttled() bool { return c.waiting.Load() }

// budgetFrame returns the buffer for a frame whose body is n bytes
// (checked against MaxPayload), charged to c's budget: it waits until
// the frame fits (with room to spare when its address's frames in
// progress, inflight with it, are over its fair share: fairRoom), or the
// connection holds nothing and the frame is small, or c closes.
func (c *Conn) budgetFrame(n int, inflight int64) (*Buffer, error) {
	b := c.budget
	total := HeaderSize + n
	first := HeaderSize + min(n, readStep)
	// A wait an Interrupt stopped, for this very frame, counted already.
	again := c.rs.rewait
	c.rs.rewait = false
	if int64(total) > b.limit {
		return nil, fmt.Errorf("%w: body of %d bytes, more than the memory budget of %d bytes", ErrFrameTooLarge, n, b.limit)
	}
	var room int64
	if inflight > 0 {
		room = b.fairRoom(c.ip, inflight, total)
	}
	if n <= readStep {
		// The whole frame fits in its first buffer: charge that
		// buffer's capacity (a pooled one may be larger).
		f := getReadBuffer(first)
		if !b.reserving.Load() && (room == 0 || !b.reservingOver.Load()) && b.tryTake(cap(f.B), room) {
			c.owe(f, cap(f.B))
			return f, nil
		}
		if total <= smallFrame && b.reserving.Load() {
			// Counted against smallCap: charged its own size, not a
			// larger pooled buffer's.
			if cap(f.B) > smallFrame {
				f.Release()
				f = smallBuffer(first)
			}
			if b.takeSmall(cap(f.B)) {
				c.owe(f, cap(f.B))
				return f, nil
			}
		}
		f.Release()
	} else if !b.reserving.Load() && (room == 0 || !b.reservingOver.Load()) && b.tryTake(total, room) {
		// Charged whole before anything is allocated: the body grows
		// into it as it arrives.
		f := getReadBuffer(first)
		c.owe(f, total)
		return f, nil
	}
	return c.budgetWait(n, total, first, inflight, room, again)
}

// smallBuffer returns a buffer for a frame of up to 4 KiB with room for
// its first n bytes, never on a pooled array larger than 4 KiB: it is
// charged about its own size, not a pooled buffer's (up to 64 KiB).
func smallBuffer(n int) *Buffer {
	f := buffers.Get().(*Buffer)
	if cap(f.B) > smallFrame {
		f.B = nil
	}
	f.B = growExact(f.B[:0], n)
	return f
}

// owe records that f holds n bytes of c's budget, charged already.
func (c *Conn) owe(f *Buffer, n int) {
	f.acct, f.owed = c, n
	c.held.Add(int64(n))
}

// budgetWait is budgetFrame's slow path: the budget is used up. The
// connection waits in the budget's queue until a release charges its
// frame for it, or (a small frame) until it holds nothing, or it closes.
// again: the same frame's wait, taken up after an Interrupt stopped it,
// counted already.
func (c *Conn) budgetWait(n, total, first int, inflight, room int64, again bool) (*Buffer, error) {
	b, w := c.budget, &c.bw
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	w.need, w.room, w.small, w.held = int64(total), room, total <= smallFrame, &c.held
	w.ip = nil
	if inflight > 0 {
		w.ip = c.ip
	}
	w.whole, w.self = false, c.fromSelf()
	w.since, w.patience = monoNow(), int64(c.opts.FrameTimeout/10)
	counted := false
	// Counted before the queue is looked at, so that a release either
	// sees this connection waiting or made its room before the
	// connection tries (and the same for wakeSmall and held).
	b.waiters.Add(1)
	// The same for its address's share: a change of what the address's
	// frames in progress hold from now on either refits it (once queued)
	// or is seen when its room is reckoned below.
	ip := w.ip
	if ip != nil {
		ip.queued.Add(1)
	}
	c.smallWait.Store(w.small)
	defer func() {
		if ip != nil {
			ip.queued.Add(-1)
		}
		c.smallWait.Store(false)
		b.done()
		if counted {
			// The wait was the server's, not the peer's: the frame's
			// FrameTimeout starts again (frameOf sets it before the
			// body's next read from the network), and the peer's
			// silence (LastRead, which IdleTimeouts count from) from
			// now, before the connection stops counting as waiting.
			c.rs.fresh = false
			c.lastRead.Store(monoNow())
			c.waiting.Store(false)
		}
	}()
	for {
		b.mu.Lock()
		granted := w.granted
		w.granted = false
		if ip != nil && !granted && !w.queued && !w.whole {
			// Reckoned when its header was read: its address's other
			// frames may have ended (or begun) since, and no refit saw
			// this frame, not queued yet.
			w.room = b.fairRoom(ip, ip.live.Load(), total)
		}
		switch {
		case granted:
		case w.queued:
			// Woken while still queued: by an Interrupt that another
			// read took already (a dialed connection): wait on.
		case w.small && c.held.Load() == 0 && (!b.reserving.Load() || w.self || b.spendSmall(smallFrame)):
			b.mu.Unlock()
			// Holds nothing: one small frame, in a buffer of its
			// size, whether it fits or not.
			f := smallBuffer(first)
			b.charge(cap(f.B))
			c.owe(f, cap(f.B))
			return f, nil
		case (len(b.queue) == 0 || w.fit() < b.queue[0].fit()) && b.admits(w):
			// Smaller than every waiting frame, and it fits.
			granted = true
		default:
			b.push(w)
			if r := b.reserved; r != nil && (w.self || r.room > 0 && w.room == 0) {
				// It passes the reservation, but frames that may not
				// pass it come first in the queue; it may fit.
				b.grantPassing(r.room > 0)
			}
		}
		b.mu.Unlock()
		if granted {
			var f *Buffer
			if w.small {
				f = smallBuffer(first)
			} else {
				f = getReadBuffer(first)
			}
			if extra := cap(f.B) - total; extra > 0 {
				b.charge(extra)
				total += extra
			}
			c.owe(f, total)
			return f, nil
		}
		if !counted {
			// Answers SendLater queued go out before the wait: they
			// hold memory of the budget themselves.
			c.flushLater()
			counted = true
			if !again {
				b.throttled.Add(1)
				if c.throttles != nil {
					c.throttles.Add(1)
				}
			}
			c.waiting.Store(true)
			b.arm()
		}
		select {
		case <-w.wake:
			if c.dialed && c.intr.Load() {
				// A caller reading the connection (Resume) whose call
				// ended: it stops, and the next holder of the reading
				// role charges the frame again (its header is read).
				b.mu.Lock()
				if w.queued {
					b.leave(w)
				}
				granted := w.granted
				b.mu.Unlock()
				if !granted {
					c.rs.hdrN, c.rs.rewait = HeaderSize, true
					c.rs.frameEnd = time.Now().Add(c.opts.FrameTimeout)
					return nil, c.interrupted()
				}
			}
		case <-c.closing:
			b.mu.Lock()
			if w.queued {
				b.leave(w)
			}
			granted := w.granted
			w.granted = false
			b.mu.Unlock()
			select {
			case <-w.wake:
			default:
			}
			if granted {
				b.release(total)
			}
			return nil, c.Err()
		}
	}
}

// refit reckons the room of the waiting frames of s's address again
// (of every address: s nil, when the number of addresses changed) from
// what their address's frames in progress hold now, and grants those
// that fit now. b.mu is held.
func (b *Budget) refit(s *ipShare) {
	changed := false
	for _, w := range b.queue {
		if w.ip != nil && !w.whole && (s == nil || w.ip == s) {
			if room := b.fairRoom(w.ip, w.ip.live.Load(), int(w.need)); room != w.room {
				w.room, changed = room, true
			}
		}
	}
	if !changed {
		return
	}
	heap.Init(&b.queue)
	if r := b.reserved; r != nil && (r.room > 0) != b.reservingOver.Load() {
		if r.room > 0 {
			b.reserving.Store(false)
			b.reservingOver.Store(true)
		} else {
			b.smallSpent.Store(0)
			b.reservingOver.Store(false)
			b.reserving.Store(true)
		}
	}
	b.grant()
}

// admits charges w's frame if it may be now, ahead of the waiting frames
// (it is smaller than them all): it fits, and no reservation holds it
// back. b.mu is held.
func (b *Budget) admits(w *budgetWaiter) bool {
	switch r := b.reserved; {
	case r == nil:
		return b.tryTake(int(w.need), w.room)
	case w.self:
		return b.tryTake(int(w.need), w.room)
	case r.room > 0:
		// Only the frames of addresses over their fair share wait
		// for it.
		return w.room == 0 && b.tryTake(int(w.need), 0)
	default:
		return w.small && b.takeSmall(int(w.need))
	}
}

// topUp charges what f's array grew past its charge, once its body is
// read (a rounded-up allocation).
func (c *Conn) topUp(f *Buffer) {
	if extra := cap(f.B) - f.owed; extra > 0 {
		c.budget.charge(extra)
		c.held.Add(int64(extra))
		f.owed += extra
	}
}
