package transport

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// The per-address bound (Options.MaxMemoryPerIP): a frame is charged its
// declared length when its header is read, so peers that declare large
// frames and send little hold that much of the budget for the price of a
// header, until the reclaimer cuts them (a tenth of FrameTimeout after
// someone began to wait) or FrameTimeout does; peers that reconnect and
// do it again take the budget again each round. The frames in progress
// (over 4 KiB, their bodies still arriving from the network) of the
// connections from one remote IP address may hold at most
// MaxMemoryPerIP together: a frame that would go over waits, its header
// read and nothing charged or allocated, until that address's frames in
// progress end (one frame in progress is always let in, whatever its
// size). Frames that have arrived whole, and answers, do not count:
// they are the budget's alone. So one address holds at most
// MaxMemoryPerIP by declarations, and the rest of the budget stays for
// the others.
//
// That leaves the budget to 8 addresses (the default share is an
// eighth). So an address also has a fair share: the limit over the
// number of addresses busy (with frames in progress, or waiting to begin
// one) and one more, for an address that begins to send (at most the
// addresses with connections); the whole budget while one address alone
// is busy (shares). A frame whose
// address's frames in progress, with it, are over that share must leave
// a fair share of the budget free when it is charged (fairRoom), and
// waits behind the frames of addresses under theirs: an address with
// little in progress finds room while many addresses hold much, instead
// of waiting for the reclaimer to cut one of them. The room is reckoned
// again for the waiting frames when the number of shares changes (at
// once when an address connects or leaves; at the reclaimer's next look,
// a twentieth of FrameTimeout, when one becomes busy or idle, which an
// address whose frames arrive whole does twice a frame), and at once for
// those of an address when what its frames in progress hold does (one
// ends, say): a frame does not wait for room its address no longer needs.
// Frames that arrived whole, and answers, count for neither; addresses
// each within their fair share can still fill the budget together.

// DefaultMaxMemoryPerIP is the default of Options.MaxMemoryPerIP for the
// default budget: an eighth of DefaultMaxMemory.
const DefaultMaxMemoryPerIP = DefaultMaxMemory / 8

// ipShare is what the frames in progress of the connections from one
// remote IP address hold of a budget.
type ipShare struct {
	b    *Budget
	addr netip.AddrPort
	refs int // connections registered with it (Budget.ipmu)

	mu       sync.Mutex
	inflight int64
	queue    []*Conn // waiting for room, first come first served
	// busy: frames of s's are in progress, or wait for room in s
	// (Budget.nbusy counts such shares).
	busy bool

	// live is inflight, for the budget's refit (under the budget's mu,
	// not s.mu); queued counts the frames of s's in progress that wait
	// for the budget (budgetWait, from before their room is reckoned
	// there): only while some do does a change of inflight reckon their
	// room again.
	live   atomic.Int64
	queued atomic.Int32
}

// ipWaiter is a connection's place in its address's queue (Conn.ipw);
// its fields other than wake are guarded by the ipShare's mu.
type ipWaiter struct {
	need    int64
	limit   int64
	granted bool
	wake    chan struct{}
}

// ThrottledByIP returns how many times a connection stopped reading
// because the frames in progress from its peer's IP address held
// Options.MaxMemoryPerIP.
func (b *Budget) ThrottledByIP() uint64 { return b.ipThrottled.Load() }

// shareOf returns the share of nc's remote IP address, counting nc in
// it; nil when nc has none (not TCP). A dialed connection's share is its
// peer's, address and port: one provider's, for the fair share of the
// answers of a consumer's providers (no MaxMemoryPerIP bound).
func (b *Budget) shareOf(nc net.Conn, dialed bool) *ipShare {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return nil
	}
	a := netip.AddrPortFrom(ip.Unmap(), 0)
	if dialed {
		a = netip.AddrPortFrom(a.Addr(), uint16(ta.Port))
	}
	b.ipmu.Lock()
	if b.ips == nil {
		b.ips = map[netip.AddrPort]*ipShare{}
	}
	s := b.ips[a]
	added := s == nil
	if added {
		s = &ipShare{b: b, addr: a}
		b.ips[a] = s
		b.nips.Store(int32(len(b.ips)))
	}
	s.refs++
	b.ipmu.Unlock()
	if added {
		b.addressesChanged()
	}
	return s
}

// dropShare uncounts a connection from s.
func (b *Budget) dropShare(s *ipShare) {
	b.ipmu.Lock()
	gone := false
	if s.refs--; s.refs == 0 {
		delete(b.ips, s.addr)
		b.nips.Store(int32(len(b.ips)))
		gone = true
		s.mu.Lock()
		if s.busy {
			// Not expected: its last connection gave back what it held.
			s.busy = false
			b.nbusy.Add(-1)
		}
		s.mu.Unlock()
	}
	b.ipmu.Unlock()
	if gone {
		b.addressesChanged()
	}
}

// fairRoom is what must stay free of b when a frame of total bytes is
// charged whose address (s) has inflight bytes in progress with it: the
// fair share of an address (b's limit over shares) when inflight is over
// it (0 otherwise, and when one address alone is busy), but never so
// much that the frame would not fit the empty budget, unless s is a
// provider whose frame the reclaimer cut within its FrameTimeout
// (wasCut): such a frame then waits for its reservation to turn whole.
func (b *Budget) fairRoom(s *ipShare, inflight int64, total int) int64 {
	k := b.shares()
	if k < 2 {
		return 0
	}
	if fair := b.limit / k; inflight > fair {
		if rest := b.limit - int64(total); rest < fair && !b.wasCut(s) {
			return rest
		}
		return fair
	}
	return 0
}

// A consumer's budget about one answer large cannot be shared: an
// answer too large to leave a fair share free is charged whenever the
// budget empties (its room capped at what it leaves), and while it is
// in progress the other providers' answers do not fit. A provider that
// stalls in such answers, and is cut a tenth of FrameTimeout later,
// would hold the budget that way again at once on its next connection,
// most of the time. So a provider (address and port) whose frame the
// reclaimer cut is marked for its connection's FrameTimeout (markCut);
// while marked, such an answer keeps the whole share as its room, i.e.
// it is charged only once its reservation turned whole (a tenth of
// FrameTimeout, then FrameTimeout, behind the other providers'
// answers), and the others' answers are read meanwhile.

// markCut marks c's provider as cut by the reclaimer, for c's
// FrameTimeout (a dialed connection's; others are not marked).
func (b *Budget) markCut(c *Conn) {
	if !c.dialed || c.ip == nil {
		return
	}
	now := monoNow()
	b.cutmu.Lock()
	if b.cut == nil {
		b.cut = map[netip.AddrPort]int64{}
	}
	for a, until := range b.cut {
		if until <= now {
			delete(b.cut, a)
		}
	}
	b.cut[c.ip.addr] = now + int64(c.opts.FrameTimeout)
	b.cutmu.Unlock()
}

// wasCut reports whether s is a provider marked by markCut.
func (b *Budget) wasCut(s *ipShare) bool {
	if s == nil {
		return false
	}
	b.cutmu.Lock()
	until, ok := b.cut[s.addr]
	b.cutmu.Unlock()
	return ok && monoNow() < until
}

// shares is the number of addresses the budget is shared by: those busy
// (with frames in progress, or waiting to begin one) and one more, for
// an address that begins to send, when it has connections; 1 while at
// most one address is busy, which may then have the whole budget: the
// idle ones' frames wait for it as for any frames that hold the budget,
// and once one of them waits it is busy too.
func (b *Budget) shares() int64 {
	if b.role.Load() == roleDialed {
		// A consumer's providers: each may answer any time.
		return int64(b.nips.Load())
	}
	busy := int64(b.nbusy.Load())
	if busy < 2 {
		return 1
	}
	return min(int64(b.nips.Load()), busy+1)
}

// settle records whether s is busy now, and reports whether that
// changed. s.mu is held.
func (s *ipShare) settle() (changed bool) {
	busy := s.inflight > 0 || len(s.queue) > 0
	if busy == s.busy {
		return false
	}
	s.busy = busy
	if busy {
		s.b.nbusy.Add(1)
	} else {
		s.b.nbusy.Add(-1)
	}
	return true
}

// changed reckons the waiting frames' room again when what s's frames in
// progress hold changed: s's own at once; when s began or ceased to be
// busy (the number of shares may have changed), every address's at the
// reclaimer's next look (refitDue): an address whose frames are read in
// full toggles busy twice a frame, and a refit walks the whole queue.
// s.mu is not held.
func (s *ipShare) changed(busy bool) {
	if busy && s.b.waiters.Load() > 0 {
		s.b.refitDue.Store(true)
	}
	s.heldChanged()
}

// addressesChanged reckons the waiting frames' room again (refit).
func (b *Budget) addressesChanged() {
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		b.refit(nil)
		b.mu.Unlock()
	}
}

// heldChanged reckons the room of s's frames in the budget's queue again,
// what s's frames in progress hold having changed (s.mu is not held).
func (s *ipShare) heldChanged() {
	if s.queued.Load() > 0 {
		s.b.mu.Lock()
		s.b.refit(s)
		s.b.mu.Unlock()
	}
}

// ipTake takes need bytes of the share of c's address for the frame whose
// header was read, its body to come from the network: it waits until the
// address's frames in progress leave room for it (or none is in
// progress), or c closes. It returns what the address's frames in
// progress hold with it (for fairRoom). The reading role calls it, and
// ipDone gives it back.
func (c *Conn) ipTake(need int) (inflight int64, err error) {
	s, w, b := c.ip, &c.ipw, c.budget
	limit := int64(c.opts.MaxMemoryPerIP)
	if c.dialed {
		limit = math.MaxInt64 // a provider's share bounds nothing
	}
	s.mu.Lock()
	if len(s.queue) == 0 && (s.inflight == 0 || s.inflight+int64(need) <= limit) {
		s.inflight += int64(need)
		inflight = s.inflight
		s.live.Store(inflight)
		busy := s.settle()
		s.mu.Unlock()
		c.rs.ipHeld = need
		s.changed(busy)
		if h := testHookIPTaken.Load(); h != nil {
			(*h)(need)
		}
		return inflight, nil
	}
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	w.need, w.limit, w.granted = int64(need), limit, false
	s.queue = append(s.queue, c)
	if s.settle() && b.waiters.Load() > 0 {
		b.refitDue.Store(true)
	}
	s.mu.Unlock()

	b.ipWaiting.Add(1)
	b.ipThrottled.Add(1)
	if c.ipThrottles != nil {
		c.ipThrottles.Add(1)
	}
	c.flushLater()
	c.waiting.Store(true)
	b.arm()
	defer func() {
		b.ipWaiting.Add(-1)
		// As after a wait for the budget: the wait was not the peer's.
		c.rs.fresh = false
		c.lastRead.Store(monoNow())
		c.waiting.Store(false)
	}()
	select {
	case <-w.wake:
		c.rs.ipHeld = need
		s.mu.Lock()
		inflight = s.inflight
		s.mu.Unlock()
		return inflight, nil
	case <-c.closing:
		s.mu.Lock()
		granted := w.granted
		if !granted {
			for i, q := range s.queue {
				if q == c {
					s.queue = append(s.queue[:i], s.queue[i+1:]...)
					break
				}
			}
		}
		s.mu.Unlock()
		select {
		case <-w.wake:
		default:
		}
		if granted {
			s.release(int64(need))
		} else {
			s.release(0) // those behind it may fit now
		}
		return 0, c.Err()
	}
}

// testHookIPTaken, when set (tests), runs on the reading role when a
// frame took its address's share at once, before it is charged.
var testHookIPTaken atomic.Pointer[func(need int)]

// waited reports whether a frame waits for room in s.
func (s *ipShare) waited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// ipDone gives back what the reading role's frame took of its address's
// share, if anything.
func (c *Conn) ipDone() {
	if n := c.rs.ipHeld; n > 0 {
		c.rs.ipHeld = 0
		c.ip.release(int64(n))
	}
}

// release gives n back and lets in the waiting frames that now fit, in
// the order they began to wait.
func (s *ipShare) release(n int64) {
	s.mu.Lock()
	s.inflight -= n
	for len(s.queue) > 0 {
		c := s.queue[0]
		w := &c.ipw
		if s.inflight != 0 && s.inflight+w.need > w.limit {
			break
		}
		s.inflight += w.need
		w.granted = true
		s.queue[0] = nil
		s.queue = s.queue[1:]
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	s.live.Store(s.inflight)
	busy := s.settle()
	s.mu.Unlock()
	s.changed(busy)
}
