package transport

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The reclaimer: while connections wait for room in a budget, it looks at
// the budget's connections every scanEvery and closes those that hold
// memory without the peer doing its part (reclaimed):
//
//   - a frame in progress that arrives slower than half the pace its
//     FrameTimeout implies (half its declared length per FrameTimeout,
//     after a grace of a tenth of FrameTimeout, with readStep bytes of
//     slack: a peer that keeps up on average may pause): its header
//     charged the declared length, so a peer that declares large frames
//     and sends little would hold the budget until FrameTimeout for the
//     price of a header;
//   - a connection with answers queued whose peer took none of them for
//     its FrameTimeout: the one holding the most first, and more while the
//     first waiting frame still would not fit (a peer that never reads,
//     and a client that writes a pipelined batch before it reads, whose
//     next request waits for its own answers to be written: that waits
//     for ever otherwise). A write that takes bytes counts as progress
//     (Conn.progress per batch, and on Linux directWrite.sent per writev
//     of a batch, so a slow reader of a large answer is not taken for
//     one that stopped; over a TLS server connection, the writes under
//     TLS, record by record: countingConn).
//
// It also reserves the budget for the frame that has waited longest, once
// that is a tenth of its FrameTimeout (Budget.reserve). It runs only
// while some connection waits (at most once a period), so it costs
// nothing to a budget that is not used up.

// scanEvery is how often the reclaimer looks, as a fraction of the
// shortest FrameTimeout of the budget's connections (minScan at least).
const (
	scanFraction = 20
	minScan      = 5 * time.Millisecond
)

// reclaimer is a budget's state for it; cmu guards it.
type reclaimer struct {
	conns  map[*Conn]struct{}
	period time.Duration
	armed  bool
	since  int64 // monoNow when connections began to wait, this time
	last   int64 // monoNow of the last look
	timer  *time.Timer
}

// Reclaimed returns how many connections the budget closed to get memory
// back while others waited for it: peers far behind in sending a frame
// whose declared length was charged, and peers that took none of their
// answers for FrameTimeout.
func (b *Budget) Reclaimed() uint64 { return b.reclaimed.Load() }

// register adds c to the connections the reclaimer looks at.
func (b *Budget) register(c *Conn) {
	p := max(c.opts.FrameTimeout/scanFraction, minScan)
	b.cmu.Lock()
	if b.rc.conns == nil {
		b.rc.conns = map[*Conn]struct{}{}
	}
	b.rc.conns[c] = struct{}{}
	if b.rc.period == 0 || p < b.rc.period {
		b.rc.period = p
	}
	b.cmu.Unlock()
}

// unregister takes c off the reclaimer's list.
func (b *Budget) unregister(c *Conn) {
	b.cmu.Lock()
	delete(b.rc.conns, c)
	b.cmu.Unlock()
}

// arm starts the reclaimer, if it is not running, when a connection
// begins to wait for room: it looks at once, or a period after its last
// look if that was less than a period ago.
func (b *Budget) arm() {
	b.cmu.Lock()
	if !b.rc.armed {
		b.rc.armed = true
		now := monoNow()
		b.rc.since = now
		wait := max(b.rc.period-time.Duration(now-b.rc.last), 0)
		if b.rc.timer == nil {
			b.rc.timer = time.AfterFunc(wait, b.reclaim)
		} else {
			b.rc.timer.Reset(wait)
		}
	}
	b.cmu.Unlock()
}

// stuckConn is a connection whose queued answers its peer does not take.
type stuckConn struct {
	c      *Conn
	queued int
}

// reclaim is one look of the reclaimer; it runs again while connections
// wait. One runs at a time (each starts the next), and the connections'
// seen fields are its own.
func (b *Budget) reclaim() {
	b.cmu.Lock()
	if b.waiters.Load() == 0 && b.ipWaiting.Load() == 0 {
		b.rc.armed = false
		b.cmu.Unlock()
		return
	}
	now, since := monoNow(), b.rc.since
	conns := make([]*Conn, 0, len(b.rc.conns))
	for c := range b.rc.conns {
		conns = append(conns, c)
	}
	b.cmu.Unlock()

	var stuck []stuckConn
	short := b.waiters.Load() > 0
	for _, c := range conns {
		// While the budget has room and only frames over an address's
		// share wait (perip.go), only that address's frames are judged.
		judge := short || c.ip != nil && c.ip.waited()
		if got, size, took, ok := c.behindPace(now); judge && ok {
			// Say which wait it was: the budget's, or only its
			// address's share's (the budget has room then).
			msg, while := "memory budget used up: closing a frame far behind its pace", "other connections waited for memory"
			if !short {
				msg = "memory share of an address used up (MaxMemoryPerIP): closing a frame far behind its pace"
				while = "other frames from its address waited for its share of memory (MaxMemoryPerIP)"
			}
			b.reclaimConn(c, msg, fmt.Errorf(
				"%w: %s sent %d bytes of a %d-byte body in %v (FrameTimeout %v), while %s",
				ErrSlowFrame, c.nc.RemoteAddr(), got, size, took.Round(time.Millisecond), c.opts.FrameTimeout, while))
			continue
		}
		if c.dialed {
			if judge {
				b.stalled(c, now, since)
			}
			continue
		}
		c.mu.Lock()
		q, p := c.queued, c.progress
		c.mu.Unlock()
		if c.direct != nil {
			p += c.direct.sent.Load()
		} else if c.tlsWrites != nil {
			p += c.tlsWrites.Load()
		}
		if q == 0 || p != c.seenProgress || c.seenAt < since || !short {
			c.seenProgress, c.seenAt = p, now
			continue
		}
		if time.Duration(now-c.seenAt) >= c.opts.FrameTimeout {
			stuck = append(stuck, stuckConn{c, q})
		}
	}
	b.mu.Lock()
	if b.refitDue.Swap(false) {
		b.refit(nil) // the busy addresses changed (perip.go)
	}
	b.reserve(now)
	b.mu.Unlock()
	if len(stuck) > 0 {
		slices.SortFunc(stuck, func(x, y stuckConn) int { return cmp.Compare(y.queued, x.queued) })
		// Enough for the frame that is let in next: the reserved one
		// while there is a reservation, else the smallest.
		b.mu.Lock()
		var need int64
		if b.reserved != nil {
			need = b.reserved.need
		} else if len(b.queue) > 0 {
			need = b.queue[0].need
		}
		b.mu.Unlock()
		used, freed, closed := b.used.Load(), int64(0), 0
		for i, s := range stuck {
			if i > 0 && used-freed+need <= b.limit {
				break
			}
			b.reclaimConn(s.c, "memory budget used up: closing a peer that takes none of its answers", fmt.Errorf(
				"%w: %s took none of its answers (%d bytes queued) for %v, while other connections waited for memory",
				ErrSlowPeer, s.c.nc.RemoteAddr(), s.queued, s.c.opts.FrameTimeout))
			freed += int64(s.queued)
			closed++
		}
		if h := testHookStuckClosed.Load(); h != nil {
			(*h)(closed)
		}
	}

	b.cmu.Lock()
	b.rc.last = monoNow()
	if b.waiters.Load() > 0 || b.ipWaiting.Load() > 0 {
		b.rc.timer.Reset(b.rc.period)
	} else {
		b.rc.armed = false
	}
	b.cmu.Unlock()
}

// stalled closes the frame in progress on c, a dialed connection (whose
// sends are not charged: the rule of answers not taken is not its), when
// none of its bytes arrived for a tenth of its FrameTimeout while frames
// waited for room (since then): a peer that sent most of a large answer
// and stopped is not behind its pace, and would hold its charge until
// FrameTimeout. Bytes waiting in the socket, or that a read is taking
// from it, count as arrived (Reading). Only a charged frame (over 4 KiB)
// is cut: smaller ones are watched for Reading only, and cutting one
// gives nothing back. Its seen fields are what had come at the last look
// (Reading's Came), and when.
func (b *Budget) stalled(c *Conn, now, since int64) {
	at := c.partAt.Load()
	// What came so far (Reading's Came), and a read under way.
	got, taking := uint64(c.arrived.Load()), false
	if c.counted {
		w := c.took.Load()
		got, taking = uint64(w>>1), w&1 != 0
	}
	if at != 0 && HeaderSize+c.partSize.Load() <= smallFrame && c.partAt.Load() == at {
		// Not charged (watched for Reading only): cutting it gives
		// nothing back.
		c.seenProgress, c.seenAt = got, now
		return
	}
	if at == 0 || got != c.seenProgress || c.seenAt < max(since, at) || taking {
		c.seenProgress, c.seenAt = got, now
		return
	}
	quiet := time.Duration(now - c.seenAt)
	if quiet < c.opts.FrameTimeout/10 || c.partAt.Load() != at {
		return
	}
	p := c.Reading()
	if p.Behind() || p.Frame != at || uint64(p.Came) != got {
		c.seenAt = now // sent: this side did not read it yet
		return
	}
	b.reclaimConn(c, "memory budget used up: closing a stalled frame", fmt.Errorf(
		"%w: %s sent %d bytes of a %d-byte body and nothing more for %v (FrameTimeout %v), while other frames waited for the memory its budget bounds (limit %d bytes: the answers in progress of this process's connections, dubbo.Options.MaxReplyMemory or exchange.Options.ReplyBudget; raise it if such peers are honest but slow)",
		ErrSlowFrame, c.nc.RemoteAddr(), p.Arrived, c.partSize.Load(), quiet.Round(time.Millisecond), c.opts.FrameTimeout, b.limit))
}

// reclaimConn closes c with err to give its memory back, counts it and
// logs (msg) the 1st, 2nd, 4th, 8th... of the budget.
func (b *Budget) reclaimConn(c *Conn, msg string, err error) {
	b.markCut(c) // before it closes: a provider may reconnect at once
	if !c.shutdown(err, false) {
		return // closing already
	}
	if c.reclaims != nil {
		c.reclaims.Add(1)
	}
	if n := b.reclaimed.Add(1); n&(n-1) == 0 {
		c.opts.Logger.Warn(msg,
			zap.Stringer("peer", c.nc.RemoteAddr()), zap.Uint64("reclaimed", n), zap.Error(err))
	}
}

// behindPace reports whether c's frame in progress (charged, its body
// not all read) is far behind the pace its FrameTimeout implies, with
// what arrived of its body, the body's length and the time since it was
// charged.
func (c *Conn) behindPace(now int64) (got, size int64, took time.Duration, behind bool) {
	at := c.partAt.Load()
	if at == 0 {
		return 0, 0, 0, false
	}
	ft := c.opts.FrameTimeout
	took = time.Duration(now - at)
	late := took - ft/10
	if late <= 0 {
		return 0, 0, took, false
	}
	if h := testHookPaceLoaded.Load(); h != nil {
		(*h)()
	}
	size = c.partSize.Load()
	got = c.arrived.Load()
	if c.partAt.Load() != at {
		// The frame ended and another began since at was read: size
		// and got may be the new one's, which at says nothing of
		// (paceStart stores them before its start). The next look
		// judges it.
		return 0, 0, took, false
	}
	// Half the declared length per FrameTimeout: FrameTimeout itself
	// bounds the frame, and a peer that keeps up on average may pause
	// (short of CPU, say) and catch up.
	want := int64(float64(size) * min(float64(late)/float64(2*ft), 1))
	if got+readStep >= want {
		return got, size, took, false
	}
	// What waits in the socket was sent too: the server did not read it
	// yet (short of CPU, say), and that is not the peer's doing.
	got += int64(socketUnread(c.nc))
	return got, size, took, got+readStep < want
}

// testHookStuckClosed, when set (tests), is told how many peers that
// took none of their answers one look of the reclaimer closed.
var testHookStuckClosed atomic.Pointer[func(closed int)]

// testHookPaceLoaded, when set (tests), runs in behindPace between its
// read of the frame's start and its reads of the frame's size and bytes.
var testHookPaceLoaded atomic.Pointer[func()]

// paceStart starts the pace of a frame whose body of n bytes is to be
// read from the network: a frame charged to a budget, or any frame of a
// connection this process made (Reading).
func (c *Conn) paceStart(n int) {
	c.partSize.Store(int64(n))
	c.arrived.Store(0)
	c.partAt.Store(monoNow())
	c.rs.paced = true
}

// ReadProgress is what Conn.Reading reports: how far a connection is in
// the frame it is reading. Two looks some time apart that see the same
// Frame and Came, and neither Behind, saw nothing come from the peer
// meanwhile.
type ReadProgress struct {
	// Frame differs for each frame whose reading is watched (0: none in
	// progress).
	Frame int64
	// Size is the body length the frame's header declares: 0 while
	// the header itself is still coming (a client's connection watches
	// a frame from its first byte).
	Size int64
	// Arrived counts the frame's body bytes read so far.
	Arrived int64
	// Came moves when bytes come: on a connection this process made
	// on Linux, over plain TCP or over TLS (Dial's), it counts every
	// byte the connection's reads took from the socket, as each read(2)
	// returns (bytes in the read buffer that the frame has not taken
	// yet included; under TLS ciphertext, counted under tls.Conn, so
	// more than the frames' bytes: compare two Cames, never Came and
	// Arrived). Over a TCP socket this process does not read itself
	// (NewConn over a caller's own tls.Conn), on Linux, it is what the
	// kernel received on the socket (TCP_INFO), read or not, so bytes
	// tls.Conn took and has not decrypted yet moved it too. Elsewhere
	// (other systems, other connections) it is Arrived (bytes a reader
	// took and has not handed on yet are then not seen).
	Came int64
	// Unread counts the bytes waiting in the socket's receive buffer
	// (Linux; 0 elsewhere).
	Unread int
	// Taking is set when bytes were being taken as Reading looked: a
	// read(2) under way, its bytes not counted in Came yet (where Came
	// counts them), or another frame begun. A reader waiting for bytes
	// (in Go's poller, under TLS too) is not taking any.
	Taking bool
}

// Behind reports whether bytes had come that the connection had not
// finished taking (Unread or Taking): this process is late, not the peer.
func (p ReadProgress) Behind() bool { return p.Unread > 0 || p.Taking }

// Reading reports the frame c is in the middle of reading, when its bytes
// come from the network and its pace is watched (any frame on a
// connection this process made, Dial's or NewConn's, charged to a budget
// or not, from its header's first byte; the body of a frame over 4 KiB
// on a Server's with a budget): a client whose
// calls wait behind a frame that got nothing for long may give up on the
// connection sooner than FrameTimeout. It takes no lock, and one
// ioctl(2) (Unread) while a frame is in progress.
func (c *Conn) Reading() ReadProgress {
	p := ReadProgress{Frame: c.partAt.Load(), Size: c.partSize.Load(), Arrived: c.arrived.Load()}
	if p.Frame == 0 {
		return p
	}
	if c.partAt.Load() != p.Frame {
		// Another frame began meanwhile: Size and Arrived may be its
		// (paceStart stores them first). Came moved.
		p.Frame, p.Taking = c.partAt.Load(), true
	}
	if !c.counted {
		p.Came, p.Unread = p.Arrived, socketUnread(c.nc)
		if n, ok := socketReceived(c.nc); ok {
			// Not read by a reader of ours (a caller's own tls.Conn):
			// what the kernel received, read or not.
			p.Came = n
		}
		return p
	}
	w := c.took.Load()
	p.Unread = socketUnread(c.nc)
	// A read under way, or one between the two loads, may hold bytes
	// that are neither in the socket nor in w any more.
	p.Taking = w&1 != 0 || c.took.Load() != w
	p.Came = w >> 1
	return p
}

// paceEnd ends it, once the body is read or the read failed.
func (c *Conn) paceEnd() {
	c.partAt.Store(0)
	c.rs.paced = false
	if c.ip != nil {
		c.ipDone()
	}
}

// arrivedOf is where readBody counts the body bytes of c's frame it reads:
// nil unless its pace is watched.
func (c *Conn) arrivedOf() *atomic.Int64 {
	if c.rs.paced {
		return &c.arrived
	}
	return nil
}
