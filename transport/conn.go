package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Frame layout known to the transport: a HeaderSize-byte header that starts
// with Magic and ends with the big-endian body length.
const (
	HeaderSize        = 16
	Magic      uint16 = 0xdabb
)

// closeFlushTimeout bounds how long Close spends writing queued frames.
const closeFlushTimeout = time.Second

// idleHold is how long a connection keeps its read buffer waiting for the
// next frame before it gives it back and waits without one.
const idleHold = 50 * time.Millisecond

// Errors of the transport layer.
var (
	// ErrClosed is the error of a connection closed by Close.
	ErrClosed = errors.New("transport: connection closed")
	// ErrBadMagic closes a connection whose peer sent a frame without the magic.
	ErrBadMagic = errors.New("transport: bad magic")
	// ErrFrameTooLarge closes a connection whose peer declared a body over the limit.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrSlowPeer closes a connection whose unwritten frames exceed
	// Options.MaxQueue, because its peer does not read.
	ErrSlowPeer = errors.New("transport: peer does not read, write queue full")
	// ErrSlowFrame closes a connection whose peer started a frame and did
	// not finish it within Options.FrameTimeout.
	ErrSlowFrame = errors.New("transport: frame not completed in time")
	// ErrServerClosed is returned by Server.Serve after Close.
	ErrServerClosed = errors.New("transport: server closed")
)

// Handler receives the frames of a connection. The exchange layer
// implements it; the goroutine that reads the connection calls it, never
// concurrently for one connection (the reading may move from goroutine to
// goroutine: see Conn.Detach).
type Handler interface {
	// Serve is called for every frame, in order. f.B holds the whole frame,
	// header included; Serve owns f and must Release it. The next frame is
	// read after Serve returns, so Serve may block to stop reading c
	// (back-pressure: the peer's writes then wait in TCP), but it must
	// return once c is closing (c.Done()). It must not call Close on c
	// (Abort is fine).
	Serve(c *Conn, f *Buffer)
	// Closed is called once, after the connection is closed and its writer
	// has stopped, with the first error: ErrClosed after Close, io.EOF when
	// the peer closed, or what broke it. It must not call Close on c.
	Closed(c *Conn, err error)
}

// Conn is one framed connection with a read goroutine and a write
// goroutine. Send may be called from any goroutine; frames queued while the
// writer is busy are written together, in few syscalls.
type Conn struct {
	nc   net.Conn
	rd   io.Reader // what the read loop reads nc with (newReader)
	h    Handler
	opts *Options

	mu       sync.Mutex
	queue    []*Buffer
	queued   int   // footprint of the frames queued and being written (Buffer.charge)
	err      error // first error; set once
	graceful bool
	// dropped is set once the writer has dropped the queue for good
	// (dropQueued): a frame put back in the queue after that (the rest of
	// a write that was under way) is released instead, or it would keep
	// its charge of the memory budget for ever.
	dropped bool

	space      chan struct{} // closed when the writer takes the queue; nil if no one waits
	wake       chan struct{}
	closing    chan struct{}
	writerDone chan struct{}
	// vectored: frames are written with writev from their own buffers
	// (plain TCP or Unix sockets); otherwise they are copied into a buffered writer (TLS,
	// pipes), which writes them in few records and calls.
	vectored bool
	wg       sync.WaitGroup

	// writing (under mu) is set while a goroutine writes: the writer
	// from taking a batch until it finds the queue empty, or a SendNow
	// for its one write. Nobody else writes meanwhile.
	writing bool
	direct  *directWrite // SendNow's write; nil when it cannot (TLS, pipes)

	lastRead atomic.Int64

	// writerWrites counts the writes the writer goroutine made, and
	// directWrites those of WriteNow (tests).
	writerWrites atomic.Uint64
	directWrites atomic.Uint64
	// laterWrites counts the writes of SendLater's frames by the
	// reading role (tests).
	laterWrites atomic.Uint64

	rs       readState     // the reading role's
	epoch    atomic.Uint64 // counts Detach calls
	detached atomic.Bool   // between Detach and Resume

	// intr (Interrupt) asks the reading role to stop; dmu orders the
	// read deadlines the role sets and the past one Interrupt sets.
	intr atomic.Bool
	dmu  sync.Mutex
	// interrupts counts the stops Interrupt caused (tests).
	interrupts atomic.Uint64

	// budget, on a Server's connections, is the memory budget its frames
	// are charged to (budget.go); held is what c's frames hold of it,
	// read and queued; waiting is set while the reading role waits for
	// room, and throttles counts those waits for the Server.
	budget    *Budget
	held      atomic.Int64
	waiting   atomic.Bool
	throttles *atomic.Uint64
	// bw is c's place in its budget's queue; smallWait is set while c
	// waits there with a frame it may read once it holds nothing.
	bw        budgetWaiter
	smallWait atomic.Bool
	// reclaims counts, for the Server, the connections its budget
	// closed to get memory back (reclaim.go). partAt (monoNow; 0: none)
	// is when the frame in progress, of a partSize-byte body of which
	// arrived bytes were read, was charged, while its body is read from
	// the network; progress (under mu) counts the writes that took frames
	// off the queue. seenProgress and seenAt are the reclaimer's own.
	reclaims     *atomic.Uint64
	partAt       atomic.Int64
	partSize     atomic.Int64
	arrived      atomic.Int64
	progress     uint64
	seenProgress uint64
	seenAt       int64
	// ip is the share of the peer's IP address in the budget
	// (perip.go; nil: none), ipw c's place in its queue, and
	// ipThrottles counts the waits there for the Server.
	ip          *ipShare
	ipw         ipWaiter
	ipThrottles *atomic.Uint64
	// tlsWrites counts the writes under a TLS server connection that
	// took bytes (tlsprogress.go; nil otherwise).
	tlsWrites *atomic.Uint64
	// own is set on a connection this process made (not a Server's),
	// whose ends (selfcall.go) are in ownEnds while it is open; self
	// caches fromSelf on a Server's connection (0 not asked yet, 1 no,
	// 2 yes).
	own  bool
	ends connEnds
	self atomic.Int32
	// dialed is set on a connection Dial made with a budget
	// (Options.Budget): the budget is charged only the frames it reads
	// over 4 KiB, from their header until their body is read; frames it
	// sends are not charged, and there is no per-IP share.
	dialed bool
	// client is set on a connection this process made (Dial, NewConn):
	// every frame whose body it reads from the network is watched
	// (paceStart, Reading), charged or not. counted is set when its
	// reader also counts the bytes it takes from the socket, in took
	// (countReads: on Linux, plain TCP and Dial's TLS connections).
	client  bool
	counted bool
	took    atomic.Int64
}

// NewConn starts serving nc, which is ready for use (any TLS handshake
// done), and calls h for its frames. opts may be nil; invalid opts (see
// Options.Validate) close the connection at once with the error.
func NewConn(nc net.Conn, h Handler, opts *Options) *Conn {
	o := opts.withDefaults()
	c := newConn(nc, h, &o, nil, nil)
	if err := opts.Validate(); err != nil {
		c.Abort(err)
	}
	return c
}

// serverCounts are a Server's counters its connections add to.
type serverCounts struct {
	throttled, reclaimed, ipThrottled atomic.Uint64
}

// newConn starts serving nc. b is the budget of a Server's connection
// (counts its Server's), or, with counts nil, of a connection Dial made
// (dialed).
func newConn(nc net.Conn, h Handler, o *Options, b *Budget, counts *serverCounts) *Conn {
	c := &Conn{
		nc:         nc,
		h:          h,
		opts:       o,
		budget:     b,
		dialed:     b != nil && counts == nil,
		client:     counts == nil,
		wake:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		c.vectored = true
		c.direct = newDirectWrite(nc)
	}
	c.rd = newReader(nc)
	c.lastRead.Store(monoNow())
	if counts != nil {
		c.throttles, c.reclaims, c.ipThrottles = &counts.throttled, &counts.reclaimed, &counts.ipThrottled
	} else {
		c.ownConn()
		c.counted = countReads(c.rd, &c.took)
	}
	if c.dialed {
		c.bw.wake = make(chan struct{}, 1) // Interrupt signals it
	}
	if b != nil {
		c.tlsWrites = writesUnder(nc)
		if c.dialed || int64(o.MaxMemoryPerIP) < b.limit {
			c.ip = b.shareOf(nc, c.dialed)
		}
		b.register(c)
	}
	c.wg.Add(1) // the reading role: see readOn
	go c.readLoop()
	c.wg.Go(c.writeLoop)
	return c
}

// Dial connects to addr (with TLS when opts.TLS is set) and starts serving
// the connection with h. ctx bounds the dial and the handshake. Invalid
// opts (see Options.Validate) are an error. With opts.Budget set, the
// frames the connection reads are charged to it while they are in
// progress (see Options.Budget).
func Dial(ctx context.Context, addr string, h Handler, opts *Options) (*Conn, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if o.Budget != nil && !o.Budget.claim(roleDialed) {
		return nil, errors.New("transport: Options.Budget is a Server's memory budget (its requests): Dial needs another for the answers its connections read (exchange.Options.ReplyBudget, dubbo.Options.MaxReplyMemory), else a handler that calls out while its request holds memory could wait for its own memory")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if o.TLS != nil {
		cfg := o.TLS
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(underTLS(nc), cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("transport: tls handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	return newConn(nc, h, &o, o.Budget, nil), nil
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr returns the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LastRead returns when the last frame (or the connection) arrived: when
// the read from the network that completed it returned (frames that the
// same read brought complete count as arriving with the first of them),
// or when the connection last stopped waiting for room in its Server's
// memory budget (Throttled), if that is later: the peer was not silent
// while the server did not read it.
func (c *Conn) LastRead() time.Time { return clockEpoch.Add(time.Duration(c.lastRead.Load())) }

// clockEpoch is what lastRead counts from: a monotonic reading
// (time.Since of a time with one) costs half of time.Now on this kind of
// VM, and the read loop takes one for most frames.
var clockEpoch = time.Now()

// monoNow returns the monotonic time since clockEpoch, in nanoseconds.
func monoNow() int64 { return int64(time.Since(clockEpoch)) }

// Plain reports whether c is a plain TCP or Unix socket connection (not
// TLS, not a pipe): one that WriteNow writes on.
func (c *Conn) Plain() bool { return c.direct != nil }

// Done is closed when the connection starts closing.
func (c *Conn) Done() <-chan struct{} { return c.closing }

// Err returns the first error that closed the connection, or nil while it
// is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Send queues frame f for writing and takes ownership of it (it is
// released after it is written, or at once on error). It returns the
// connection's error if it is closed. Send does not block on the network.
func (c *Conn) Send(f *Buffer) error {
	if err := c.enqueue(f); err != nil {
		return err
	}
	c.Kick()
	return nil
}

// enqueue queues f without waking the writer; see Send.
func (c *Conn) enqueue(f *Buffer) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		f.Release()
		return err
	}
	n := f.footprint()
	if c.queued+n > c.opts.MaxQueue && len(c.queue) > 0 {
		c.mu.Unlock()
		f.Release()
		err := fmt.Errorf("%w: more than %d bytes queued", ErrSlowPeer, c.opts.MaxQueue)
		c.shutdown(err, false)
		return err
	}
	f.charge = n
	c.bill(f)
	c.queue = append(c.queue, f)
	c.queued += n
	c.mu.Unlock()
	return nil
}

// Kick wakes the connection's writer to write what is queued, the frames
// of SendLater included.
func (c *Conn) Kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// SendLater is Send for the goroutine that holds the reading role (in
// Handler.Serve, or after Reattach): f is queued without waking the
// writer, and the read loop writes the frames queued so itself, with one
// writev that does not wait for the socket, before it next waits for the
// network (what the socket does not take goes to the writer). Responses to
// requests read together thus leave together, from the goroutine that
// read them, as a server that answers from its read loop and flushes when
// no input is buffered: no hand-off to the writer. The frames move with
// the reading role (Detach, Resume), and any wake-up of the writer (Send,
// Kick, Close) writes them too. On connections other than plain TCP or Unix sockets it
// is Send, and so it is for a frame of laterMax bytes or more (or with
// spliced bytes): large frames arrive one per read, so the reader would
// write each alone, where the writer gathers them.
//
// One read that brought many frames is answered in two writes, not one:
// once laterSplit or more frames are queued and as many or fewer (but
// laterSplit at least) remain buffered (about half of the read), SendLater writes
// what is queued at once, so that the peer starts on those answers while
// the reader serves the rest of the read; the rest leave before the read
// loop next waits, as before. Answered all at the end, the peer of a
// connection that carries all its calls waits idle while the reader runs
// them, and the reader idles while the peer runs its answers: the two
// take turns instead of overlapping.
func (c *Conn) SendLater(f *Buffer) error {
	if c.direct == nil || f.Len() >= laterMax || f.Spliced() {
		return c.Send(f)
	}
	if err := c.enqueue(f); err != nil {
		return err
	}
	rs := &c.rs
	rs.later = true
	rs.laterN++
	if !rs.split && rs.laterN >= laterSplit {
		// About as many frames left in the read as answered, and
		// laterSplit at least.
		if b := c.Buffered(); b >= laterSplit*rs.frameLen && b <= rs.laterN*rs.frameLen {
			rs.split = true
			c.writeLater()
		}
	}
	return nil
}

// laterMax is the size from which SendLater is Send.
const laterMax = 4 << 10

// laterSplit is the least number of frames SendLater writes before the
// read that brought their requests is used up, and the least left to
// answer after (see SendLater): a read of fewer than twice as many frames
// is answered with one write.
const laterSplit = 4

// flushLater writes the frames SendLater queued, before the read loop
// waits for the network: from this goroutine when nobody else writes,
// else they are the writer's already. The next read may be split again.
func (c *Conn) flushLater() {
	c.rs.split = false
	if c.rs.later {
		c.writeLater()
	}
}

// writeLater is flushLater's work, out of line.
func (c *Conn) writeLater() {
	rs := &c.rs
	rs.later = false
	rs.laterN = 0
	c.mu.Lock()
	if c.err != nil || c.writing || len(c.queue) == 0 {
		// Closing, or the writer (or a SendNow, which wakes it when it
		// leaves frames queued) has them.
		c.mu.Unlock()
		return
	}
	for _, f := range c.queue {
		if f.Spliced() {
			// A Send queued it (and woke the writer): the writer
			// writes spliced bytes, and these frames with them.
			c.mu.Unlock()
			c.Kick()
			return
		}
	}
	q := c.queue
	c.queue = rs.spare[:0]
	c.writing = true
	c.mu.Unlock()
	taken := 0
	for _, f := range q {
		taken += f.charge
	}
	raceReleaseIO()
	n, err := c.direct.writev(q)
	c.laterWrites.Add(1)
	var rest []*Buffer
	left := 0 // the charge of rest
	if err == nil {
		rest = c.unwritten(q, n)
		for _, f := range rest {
			left += f.charge
		}
	} else {
		for _, f := range q {
			f.Release()
		}
	}
	clear(q)
	rs.spare = q[:0]
	c.mu.Lock()
	c.writing = false
	c.queued -= taken - left
	c.progress++
	if c.space != nil {
		close(c.space)
		c.space = nil
	}
	if len(rest) > 0 {
		if c.dropped {
			defer releaseAll(rest)
		} else {
			c.queue = append(rest, c.queue...)
		}
	}
	wake := len(c.queue) > 0
	c.mu.Unlock()
	if err != nil {
		c.shutdown(err, false)
		return
	}
	if wake {
		c.Kick()
	}
}

// unwritten releases the frames of q that the first n bytes wrote, and
// returns the rest, the first of them cut to its unwritten tail (a copy).
func (c *Conn) unwritten(q []*Buffer, n int) []*Buffer {
	for i, f := range q {
		if n >= len(f.B) {
			n -= len(f.B)
			f.Release()
			continue
		}
		rest := make([]*Buffer, 0, len(q)-i)
		if n > 0 {
			tail := GetBuffer()
			tail.B = append(tail.B, f.B[n:]...)
			tail.charge = tail.footprint()
			c.bill(tail)
			f.Release()
			rest = append(rest, tail)
		} else {
			rest = append(rest, f)
		}
		return append(rest, q[i+1:]...)
	}
	return nil
}

// SendNow is Send for a frame that is worth writing at once: when nothing
// is being written or waits in the queue, it writes f from the calling
// goroutine, with one write that does not wait for the socket (what the
// socket does not take is queued for the writer), instead of waking the
// connection's writer goroutine. Otherwise, and on connections other than
// plain TCP or Unix sockets, it is Send. A lone response or request saves a hand-off to
// the writer that way; frames that come in numbers are better queued,
// so that the writer sends many with one call. A frame with spliced bytes
// is always queued.
func (c *Conn) SendNow(f *Buffer) error {
	if taken, err := c.WriteNow(f); taken {
		return err
	}
	return c.Send(f)
}

// WriteNow is SendNow for a caller that queues its frames its own way
// when they cannot be written at once (SendWait, say): when nothing is
// being written or waits in the queue, and the connection is plain TCP (or a Unix socket)
// and f has no spliced bytes, it takes ownership of f and writes it from
// the calling goroutine with one write that does not wait for the socket
// (what the socket does not take is queued for the writer, ahead of
// anything queued meanwhile), and reports true, with the error that
// closed the connection if the write failed. Otherwise it reports false
// and f stays the caller's. It never waits for the socket or for another
// writer, so it never blocks the caller on a peer that does not read.
func (c *Conn) WriteNow(f *Buffer) (bool, error) {
	if c.direct == nil || f.Spliced() {
		return false, nil
	}
	c.mu.Lock()
	if c.err != nil || c.writing || len(c.queue) > 0 {
		c.mu.Unlock()
		return false, nil
	}
	c.writing = true
	c.mu.Unlock()
	raceReleaseIO()
	n, err := c.direct.write(f.B)
	c.directWrites.Add(1)
	if err != nil {
		f.Release()
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
		c.shutdown(err, false)
		return true, c.Err()
	}
	var rest *Buffer
	if n < len(f.B) {
		// The socket is full: the writer sends the rest, first. The
		// frame is cut to it, not copied (a large frame is mostly rest).
		f.B = f.B[n:]
		rest = f
	} else {
		f.Release()
	}
	c.mu.Lock()
	c.writing = false
	if rest != nil && c.dropped {
		defer rest.Release()
		rest = nil
	}
	if rest != nil {
		c.queue = append(c.queue, nil)
		copy(c.queue[1:], c.queue)
		c.queue[0] = rest
		rest.charge = rest.footprint()
		c.bill(rest)
		c.queued += rest.charge
	}
	wake := len(c.queue) > 0
	c.mu.Unlock()
	if wake {
		c.Kick()
	}
	return true, nil
}

// SendWait is Send for callers that may wait: when the queue is over
// Options.MaxQueue it waits until the writer has taken it, or until ctx is
// done or deadline (if not zero) passes, and returns
// context.DeadlineExceeded or ctx's error then, instead of closing the
// connection with ErrSlowPeer. It takes ownership of f.
func (c *Conn) SendWait(ctx context.Context, deadline time.Time, f *Buffer) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			f.Release()
			return err
		}
		if n := f.footprint(); c.queued+n <= c.opts.MaxQueue || len(c.queue) == 0 {
			f.charge = n
			c.bill(f)
			c.queue = append(c.queue, f)
			c.queued += n
			c.mu.Unlock()
			select {
			case c.wake <- struct{}{}:
			default:
			}
			return nil
		}
		if c.space == nil {
			c.space = make(chan struct{})
		}
		space := c.space
		c.mu.Unlock()
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(deadline))
			}
			timeout = timer.C
		}
		select {
		case <-space:
			continue
		case <-c.closing:
			continue // the loop returns the connection's error
		case <-ctx.Done():
			f.Release()
			return ctx.Err()
		case <-timeout:
			f.Release()
			return context.DeadlineExceeded
		}
	}
}

// Close writes the frames already queued (for at most a second), closes the
// connection and waits for its goroutines, including the Handler's Closed
// call. It is idempotent and safe for concurrent use, but must not be
// called from the Handler's callbacks (use Abort there).
func (c *Conn) Close() error {
	c.shutdown(ErrClosed, true)
	c.wg.Wait()
	return nil
}

// Abort closes the connection at once, with err as its error if it is the
// first, and does not wait for the goroutines. Queued frames are dropped.
func (c *Conn) Abort(err error) {
	if err == nil {
		err = ErrClosed
	}
	c.shutdown(err, false)
}

// shutdown reports whether err is the connection's error (the first).
func (c *Conn) shutdown(err error, graceful bool) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = err
	c.graceful = graceful
	c.mu.Unlock()
	close(c.closing)
	if graceful {
		// Bounds a write in progress to a stuck peer.
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	} else {
		c.nc.Close()
	}
	return true
}

// readState is the read loop's state, which moves with the reading role
// from goroutine to goroutine (Detach, Resume): only the goroutine that
// holds the role touches it.
type readState struct {
	br  *bufio.Reader
	hdr [HeaderSize]byte
	// The read deadline set on c.nc (zero: none), and whether it bounds
	// the current frame (FrameTimeout) rather than the wait for the next.
	deadline      time.Time
	frameDeadline bool
	// fresh: the current frame's FrameTimeout deadline is set;
	// frameEnd is that deadline.
	fresh    bool
	frameEnd time.Time
	// A frame Interrupt stopped the role in the middle of, which the
	// next holder finishes: hdrN bytes of its header in hdr (part nil),
	// or its header and the body bytes read so far in part.
	hdrN int
	part *Buffer
	// hdrPaced: the header's rest comes from the network and its pace is
	// watched (a client's frame: Reading), until the header is read.
	hdrPaced bool
	// rewait: that frame's wait for budget room was counted (Throttled)
	// before Interrupt stopped it; the next holder's wait for the same
	// frame is not counted again.
	rewait bool
	// later: SendLater queued frames that flushLater has not looked at;
	// spare is flushLater's reused slice. laterN counts those frames,
	// and split is set once SendLater wrote within the current read
	// (see SendLater); frameLen is the length of the frame served last.
	later    bool
	spare    []*Buffer
	laterN   int
	split    bool
	frameLen int
	// paced: the frame's body is read from the network, and its pace
	// watched (Conn.partAt).
	paced bool
	// ipHeld is what the frame took of its address's share (perip.go).
	ipHeld int
}

// errDetached ends a read loop whose Handler.Serve called Detach.
var errDetached = errors.New("transport: reading detached")

// Detach may only be called from Handler.Serve: the calling goroutine gives
// up reading c, and once Serve returns the read loop it ran in returns
// without reading further. Whoever called Detach must then make sure
// that exactly one goroutine calls Resume, soon: until then c is not read,
// and Close waits for it. The frame Serve was given stays the caller's, so
// it can serve it while another goroutine reads on (a leader/follower
// scheme: the goroutine that read a request runs it, without a hand-off,
// and an idle one takes over reading).
func (c *Conn) Detach() {
	c.detached.Store(true)
	c.epoch.Add(1)
}

// Resume reads and serves c's frames on the calling goroutine, from where
// the goroutine that called Detach left off. It returns true when Serve
// detaches again (another goroutine must then Resume), false when the
// connection has ended (it is closed, and the Handler's Closed has run).
// It panics if c is not detached.
func (c *Conn) Resume() bool {
	if !c.detached.CompareAndSwap(true, false) {
		panic("transport: Resume of a connection that is not detached")
	}
	return c.readOn()
}

// Reattach, called from Handler.Serve after Detach, takes the reading role
// back when no goroutine has called Resume yet: it reports true, and the
// read loop goes on after Serve returns as if Serve had not detached. When
// it reports false, a Resume came first. Whoever hands out the role must
// make sure Resume and Reattach do not race for it: Resume panics if
// Reattach won.
func (c *Conn) Reattach() bool {
	if !c.detached.CompareAndSwap(true, false) {
		return false
	}
	c.epoch.Add(^uint64(0)) // undoes Detach's count: no one else counted since
	return true
}

// errInterrupted ends a read loop that Interrupt stopped.
var errInterrupted = errors.New("transport: reading interrupted")

// pastDeadline is the read deadline Interrupt sets: one that has passed.
var pastDeadline = time.Unix(1, 0)

// Interrupt makes the goroutine that holds the reading role stop reading
// at once: when it waits for the next frame, or for the rest of a frame
// it has read part of (the next holder finishes that frame, within the
// frame's own FrameTimeout), and else before it reads again (a frame it
// serves is served whole). It then gives the role up as Detach does: its Resume
// returns true (the connection's own read loop ends), and exactly one
// goroutine must call Resume soon. An Interrupt while nobody reads stops
// the next goroutine that does, before it reads anything; one role
// holder is stopped at most once by any number of Interrupt calls made
// before it stops. It is for a goroutine that reads in Resume while it
// waits for something else too (a consumer's call that reads its own
// response, whose deadline may pass first): Handler.Serve calls Detach
// instead.
func (c *Conn) Interrupt() {
	c.dmu.Lock()
	c.intr.Store(true)
	// The wait ends now. A role that sets a deadline after this (under
	// dmu) sees intr and leaves this one: its next read from the
	// network fails, between frames or within one.
	_ = c.nc.SetReadDeadline(pastDeadline)
	c.dmu.Unlock()
	if c.dialed {
		// And a wait for room in the budget (budgetWait).
		c.bw.signal()
	}
}

// interrupted ends the reading role's loop for Interrupt.
func (c *Conn) interrupted() error {
	c.dmu.Lock()
	c.intr.Store(false)
	c.dmu.Unlock()
	// Interrupt may have set a deadline the role does not know: the next
	// reader sets its own before it waits.
	c.rs.deadline, c.rs.frameDeadline = pastDeadline, true
	c.interrupts.Add(1)
	return errInterrupted
}

// idleDeadline sets the read deadline for the wait for the next frame,
// unless Interrupt asked the role to stop (errInterrupted then).
func (c *Conn) idleDeadline(t time.Time) error {
	c.dmu.Lock()
	if c.intr.Load() {
		c.dmu.Unlock()
		return c.interrupted()
	}
	err := c.rs.setDeadline(c.nc, t, false)
	c.dmu.Unlock()
	return err
}

// Queued returns the memory of the frames queued on c and not yet
// written, the one being written included, as Options.MaxQueue counts it
// (each frame's whole buffer): what a peer that reads nothing makes c
// hold. A caller may decline to queue what is not needed, such as the
// answer to a heartbeat, while it is high.
func (c *Conn) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// Buffered reports how many bytes of the frames that follow the one being
// served have already been read from the network. Only Handler.Serve may
// call it, before any Detach.
func (c *Conn) Buffered() int {
	if c.rs.br == nil {
		return 0
	}
	return c.rs.br.Buffered()
}

func (c *Conn) readLoop() { c.readOn() }

// readOn runs the read loop while the calling goroutine holds the reading
// role; see Resume.
func (c *Conn) readOn() bool {
	err := c.read()
	if err == errDetached {
		return true
	}
	if err == errInterrupted {
		c.detached.Store(true)
		return true
	}
	putReader(c.rs.br)
	c.rs.br = nil
	if c.rs.part != nil {
		c.rs.part.Release()
		c.rs.part = nil
	}
	if c.ip != nil {
		c.ipDone()
	}
	c.shutdown(err, false)
	<-c.writerDone
	c.nc.Close()
	c.forgetOwn()
	if c.budget != nil {
		c.budget.unregister(c)
		if c.ip != nil {
			c.budget.dropShare(c.ip)
		}
	}
	c.h.Closed(c, c.Err())
	c.wg.Done() // the reading role ends
	return false
}

func (rs *readState) setDeadline(nc net.Conn, t time.Time, frame bool) error {
	rs.deadline, rs.frameDeadline = t, frame
	return nc.SetReadDeadline(t)
}

// frameStarted bounds the rest of the frame by FrameTimeout, once per
// frame, before the first read from the network that the frame needs.
func (c *Conn) frameStarted() error {
	rs := &c.rs
	if rs.fresh {
		return nil
	}
	rs.fresh = true
	rs.frameEnd = time.Now().Add(c.opts.FrameTimeout)
	var err error
	c.dmu.Lock()
	if !c.intr.Load() {
		// Else Interrupt's past deadline stays: the frame's next read
		// from the network stops the role (stopped), and the next
		// holder finishes the frame (frameAgain).
		err = rs.setDeadline(c.nc, rs.frameEnd, true)
	}
	c.dmu.Unlock()
	return err
}

// frameAgain sets again the deadline of a frame that Interrupt stopped
// the previous holder in, for the rest of it (unless Interrupt asked this
// holder to stop too).
func (c *Conn) frameAgain() error {
	rs := &c.rs
	c.flushLater()
	c.dmu.Lock()
	if c.intr.Load() {
		c.dmu.Unlock()
		return c.interrupted()
	}
	rs.fresh = true
	err := rs.setDeadline(c.nc, rs.frameEnd, true)
	c.dmu.Unlock()
	return err
}

// stopped reports whether err, from a read within a frame, is Interrupt's
// past deadline: the role then stops, keeping what it read of the frame.
func (c *Conn) stopped(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) && c.intr.Load()
}

// readHeader reads the frame's header from hdr[k:] on (within a frame).
func (c *Conn) readHeader(k int) error {
	rs := &c.rs
	if c.client && !rs.paced && rs.br.Buffered() < HeaderSize-k {
		// The frame has begun and the rest of its header comes from
		// the network: a peer may stop within it too (Reading).
		c.paceStart(0)
		rs.hdrPaced = true
	}
	n, err := io.ReadFull(rs.br, rs.hdr[k:])
	if err == nil {
		if rs.hdrPaced {
			// Watched again, if it must be, from its body (frameOf):
			// not while it may wait for room in a budget.
			rs.hdrPaced = false
			c.paceEnd()
		}
		return nil
	}
	if c.stopped(err) {
		c.rs.hdrN = k + n
		return c.interrupted()
	}
	if err == io.EOF && k > 0 {
		// The header's first bytes came before: the peer closed
		// within a frame, not between frames.
		err = io.ErrUnexpectedEOF
	}
	return c.readErr(err)
}

// readFrameBody reads the rest of f's body, whose length its header
// declares (checked against MaxPayload).
func (c *Conn) readFrameBody(f *Buffer) error {
	n := int(binary.BigEndian.Uint32(f.B[12:HeaderSize]))
	err := readBody(c.rs.br, c.rd, f, n-(len(f.B)-HeaderSize), c.arrivedOf())
	if c.rs.paced && !c.stopped(err) {
		c.paceEnd()
	}
	if err == nil {
		if f.acct != nil && c.dialed {
			// Read: a dialed connection's budget bounds only the
			// frames in progress.
			c.unbill(f.owed)
			f.acct, f.owed = nil, 0
		} else if f.acct != nil && cap(f.B) > f.owed {
			c.topUp(f)
		}
		return nil
	}
	if c.stopped(err) {
		c.rs.part = f
		return c.interrupted()
	}
	f.Release()
	return c.readErr(err)
}

func (c *Conn) read() error {
	rs := &c.rs
	hdr := rs.hdr[:]
	for {
		rs.fresh = false
		if rs.part != nil || rs.hdrN > 0 {
			// The previous holder was stopped within a frame.
			if err := c.frameAgain(); err != nil {
				return err
			}
			f := rs.part
			if f == nil {
				k := rs.hdrN
				rs.hdrN = 0
				if err := c.readHeader(k); err != nil {
					return err
				}
				var err error
				if f, err = c.frameOf(); err != nil {
					return err
				}
			}
			rs.part = nil
			if err := c.readFrameBody(f); err != nil {
				return err
			}
			c.lastRead.Store(monoNow())
			if c.serve(f) {
				return errDetached
			}
			continue
		}
		if c.intr.Load() {
			return c.interrupted()
		}
		// arrived: this frame needed a read from the network (else it
		// came complete with an earlier one, whose time is LastRead's).
		arrived := rs.br == nil || rs.br.Buffered() == 0
		if rs.br != nil && rs.br.Buffered() == 0 {
			// Between frames of a busy connection: wait for the next one
			// with the buffer, for up to idleHold, so that a frame costs
			// one read and not a one-byte read and another. The deadline
			// is moved only when it gets near, not for every frame.
			c.flushLater()
			now := time.Now()
			if rs.frameDeadline || rs.deadline.Sub(now) < idleHold/2 {
				if err := c.idleDeadline(now.Add(idleHold)); err != nil {
					return err
				}
			}
			if _, err := rs.br.Peek(1); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) || rs.br.Buffered() > 0 {
					return err
				}
				if c.intr.Load() {
					return c.interrupted()
				}
				// Idle: give the buffer back.
				putReader(rs.br)
				rs.br = nil
			}
		}
		if rs.br == nil {
			// Idle: wait for the next frame's first byte without a
			// deadline and without holding a buffer.
			c.flushLater()
			if !rs.deadline.IsZero() {
				if err := c.idleDeadline(time.Time{}); err != nil {
					return err
				}
			}
			if _, err := io.ReadFull(c.rd, hdr[:1]); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && c.intr.Load() {
					return c.interrupted()
				}
				return err
			}
			if err := c.frameStarted(); err != nil {
				return err
			}
			rs.br = getReader(c.rd, c.opts.ReadBufferSize)
			if err := c.readHeader(1); err != nil {
				return err
			}
		} else {
			if rs.br.Buffered() < HeaderSize {
				c.flushLater()
				if err := c.frameStarted(); err != nil {
					return err
				}
			}
			if err := c.readHeader(0); err != nil {
				return err
			}
		}
		f, err := c.frameOf()
		if err != nil {
			return err
		}
		if err := c.readFrameBody(f); err != nil {
			return err
		}
		if arrived || rs.fresh {
			c.lastRead.Store(monoNow())
		}
		if c.serve(f) {
			return errDetached
		}
	}
}

// frameOf checks the header read into hdr and returns the frame's buffer
// with it, for its body.
func (c *Conn) frameOf() (*Buffer, error) {
	rs := &c.rs
	hdr := rs.hdr[:]
	if binary.BigEndian.Uint16(hdr[0:2]) != Magic {
		return nil, fmt.Errorf("%w: % x", ErrBadMagic, hdr[0:2])
	}
	// Checked as the header's uint32: on a 32-bit platform a length of
	// 2 GiB or more would be a negative int.
	u := binary.BigEndian.Uint32(hdr[12:16])
	if uint64(u) > uint64(c.opts.MaxPayload) {
		return nil, fmt.Errorf("%w: body of %d bytes, limit %d", ErrFrameTooLarge, u, c.opts.MaxPayload)
	}
	n := int(u)
	var f *Buffer
	if c.budget != nil && (!c.dialed || HeaderSize+n > smallFrame) {
		var inflight int64
		if c.ip != nil && HeaderSize+n > smallFrame && rs.br.Buffered() < n {
			// A frame whose body is to come: its address's frames in
			// progress must leave room for it, and when they are over
			// its fair share the budget must keep room for others
			// (perip.go).
			var err error
			if inflight, err = c.ipTake(HeaderSize + n); err != nil {
				return nil, err
			}
		}
		var err error
		if f, err = c.budgetFrame(n, inflight); err != nil {
			if c.ip != nil {
				c.ipDone()
			}
			return nil, err
		}
	}
	if rs.br.Buffered() < n {
		c.flushLater()
		if err := c.frameStarted(); err != nil {
			if f != nil {
				f.Release()
				if c.ip != nil {
					c.ipDone()
				}
			}
			return nil, err
		}
		if f != nil || c.client {
			c.paceStart(n)
		}
	} else if rs.ipHeld > 0 {
		// It arrived whole meanwhile.
		c.ipDone()
	}
	if f == nil {
		// As readBody would grow it: a declared length gets at most
		// readStep bytes before they arrive.
		f = getReadBuffer(HeaderSize + min(n, readStep))
	}
	f.B = append(f.B, hdr...)
	return f, nil
}

// serve hands f to the Handler; it reports whether Serve detached:
// another goroutine reads on, and c.rs is its own now.
func (c *Conn) serve(f *Buffer) bool {
	raceAcquireIO()
	e := c.epoch.Load()
	c.rs.frameLen = len(f.B)
	c.h.Serve(c, f)
	return c.epoch.Load() != e
}

// readErr names a read deadline that passed within a frame.
func (c *Conn) readErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s sent part of a frame and nothing more for %v", ErrSlowFrame, c.nc.RemoteAddr(), c.opts.FrameTimeout)
	}
	return err
}

// Buffers of the default size are pooled, so that idle connections hold
// none.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, DefaultBufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, DefaultBufferSize) }}
)

func getReader(r io.Reader, size int) *bufio.Reader {
	if size != DefaultBufferSize {
		return bufio.NewReaderSize(r, size)
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	if br != nil && br.Size() == DefaultBufferSize {
		br.Reset(nil)
		readers.Put(br)
	}
}

func getWriter(w io.Writer, size int) *bufio.Writer {
	if size != DefaultBufferSize {
		return bufio.NewWriterSize(w, size)
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func putWriter(bw *bufio.Writer) {
	if bw != nil && bw.Size() == DefaultBufferSize {
		bw.Reset(nil)
		writers.Put(bw)
	}
}

// readBody appends n bytes from br to f, growing f only as bytes arrive so
// that a declared length costs nothing until the peer sends it. Each step
// at most quadruples the buffer and never past the declared length, so a
// body of B bytes costs about 4/3 × B in allocations. Once br's buffered
// bytes are taken, a remainder of directRead bytes or more is read from nc
// straight into f rather than through br (one copy less).
//
// arrived, when not nil, counts the bytes read as they come.
func readBody(br *bufio.Reader, nc io.Reader, f *Buffer, n int, arrived *atomic.Int64) error {
	for n > 0 {
		chunk := min(n, max(3*len(f.B), readStep))
		f.B = growExact(f.B, len(f.B)+chunk)
		start := len(f.B)
		f.B = f.B[:start+chunk]
		p := f.B[start:]
		if b := br.Buffered(); b > 0 && len(p) >= directRead {
			k, _ := br.Read(p[:min(b, len(p))]) // buffered bytes: no error
			p = p[k:]
			if arrived != nil {
				arrived.Add(int64(k))
			}
		}
		var r io.Reader = br
		if br.Buffered() == 0 && len(p) >= directRead {
			r = nc
		}
		if k, err := readFull(r, p, arrived); err != nil {
			// f keeps what arrived, for a frame finished later
			// (Interrupt).
			f.B = f.B[:len(f.B)-len(p)+k]
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		n -= chunk
	}
	return nil
}

// readFull is io.ReadFull that counts in arrived (when not nil) the
// bytes of each read as it returns.
func readFull(r io.Reader, p []byte, arrived *atomic.Int64) (int, error) {
	if arrived == nil {
		return io.ReadFull(r, p)
	}
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		arrived.Add(int64(k))
		if err != nil {
			if n == len(p) {
				return n, nil
			}
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// directRead is the size from which a body's remainder bypasses the read
// buffer.
const directRead = 4 << 10

// readStep is the least that readBody grows a frame by.
const readStep = 64 << 10

// growExact returns b with capacity at least n, allocating exactly n
// (rounded up to the allocator's size class); from noZeroMin bytes the
// new memory is not zeroed first, so the caller must write the bytes
// past len(b) before it exposes them.
func growExact(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	var nb []byte
	if n >= noZeroMin {
		nb = makeNoZero(n)[:len(b)]
	} else {
		nb = make([]byte, len(b), n)
	}
	copy(nb, b)
	return nb
}

func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	var batch []*Buffer
	var vw *vectorWriter
	if c.vectored {
		vw = &vectorWriter{}
	}
	for {
		select {
		case <-c.wake:
		case <-c.closing:
			c.mu.Lock()
			graceful := c.graceful
			c.mu.Unlock()
			if graceful {
				c.awaitDirect()
				if vw != nil {
					_ = c.writeVectored(vw, &batch)
					vw.drop()
				} else {
					bw := getWriter(c.nc, c.opts.WriteBufferSize)
					_ = c.writeQueued(bw, &batch)
					_ = bw.Flush()
					putWriter(bw)
				}
				c.nc.Close()
			}
			c.dropQueued()
			return
		}
		if vw != nil {
			if err := c.writeVectored(vw, &batch); err != nil {
				// The connection is marked dead first: a frame
				// written directly (WriteNow) between clearing
				// writing and the shutdown would follow a batch
				// cut in the middle of a frame. Then writing is
				// cleared, which writeVectored left set: a
				// graceful close's awaitDirect would wait a second
				// for it.
				c.shutdown(err, false)
				c.mu.Lock()
				c.writing = false
				c.mu.Unlock()
				vw.drop()
			}
			continue
		}
		// The buffer is held only while there is something to write.
		bw := getWriter(c.nc, c.opts.WriteBufferSize)
		err := c.writeQueued(bw, &batch)
		if err != nil {
			c.shutdown(err, false)
		} else {
			putWriter(bw)
		}
	}
}

// writeQueued writes everything queued, taking more as it comes, and
// flushes when the queue is empty. The bytes of a batch stay counted in
// queued until the batch is written, so that MaxQueue bounds what waits
// in memory, in the queue and in the writer together.
func (c *Conn) writeQueued(bw *bufio.Writer, batch *[]*Buffer) error {
	yielded := false
	for {
		c.mu.Lock()
		q := c.queue
		c.queue = (*batch)[:0]
		c.mu.Unlock()
		if len(q) == 0 {
			*batch = q
			if !yielded && bw.Buffered() > 0 {
				// Let goroutines about to send queue their frames, so
				// that one syscall carries them all.
				yielded = true
				runtime.Gosched()
				continue
			}
			return bw.Flush()
		}
		raceReleaseIO()
		var err error
		written := 0
		for i, f := range q {
			if !f.take() {
				// Withdrawn by its lender: not a byte of it is written.
				written += f.charge
				f.Release()
				q[i] = nil
				continue
			}
			if f.Lent() {
				// bw may hold or write the bytes after a wait for the
				// network; the lender's must be given back before.
				f.own()
			}
			if err == nil {
				if f.Spliced() {
					f.segments(func(p []byte) {
						if err == nil {
							_, err = bw.Write(p)
						}
					})
				} else {
					_, err = bw.Write(f.B)
				}
			}
			written += f.charge
			f.Release()
			q[i] = nil
		}
		*batch = q
		c.dequeued(written)
		if err != nil {
			return err
		}
	}
}

// dequeued takes the charge n of frames written or dropped off the
// queue's count and wakes the senders waiting for room.
func (c *Conn) dequeued(n int) {
	c.mu.Lock()
	c.queued -= n
	c.progress++
	if c.space != nil {
		close(c.space)
		c.space = nil
	}
	c.mu.Unlock()
}

// Bounds of one vectored write.
const (
	maxVectorParts = 1024 // the kernel's limit of buffers per writev
	maxVectorBytes = 1 << 20
)

// vectorWriter holds the frames of a batch until one writev has written
// them all: their bytes are not copied into a write buffer.
type vectorWriter struct {
	frames []*Buffer
	iov    net.Buffers // the frames' bytes; WriteTo consumes a copy
	out    net.Buffers // that copy: a local one would escape, one allocation per write
	bytes  int
	charge int // the frames' charge against MaxQueue

	// lent: the iov pieces (indices) that are borrowed bytes of lent
	// frames (Buffer.Lend); own holds the copies settleLent and
	// settleRest make; pieces is len(iov) when the write began.
	lent     []int
	own      []byte
	pieces   int
	settleFn func([][]byte) // settleRest, made once
}

// add adds taken frame f to the batch.
func (w *vectorWriter) add(f *Buffer) {
	w.frames = append(w.frames, f)
	switch {
	case f.Lent():
		at := 0
		for _, s := range f.parts {
			if s.at > at {
				w.iov = append(w.iov, f.B[at:s.at])
			}
			w.lent = append(w.lent, len(w.iov))
			w.iov = append(w.iov, s.p)
			at = s.at
		}
		if len(f.B) > at {
			w.iov = append(w.iov, f.B[at:])
		}
	case f.Spliced():
		f.segments(w.part)
	default:
		w.iov = append(w.iov, f.B)
	}
	w.bytes += f.Len()
	w.charge += f.charge
}

func (w *vectorWriter) part(p []byte) { w.iov = append(w.iov, p) }

// write writes and releases the frames held; it returns their charge
// against MaxQueue.
func (w *vectorWriter) write(c *Conn) (int, error) {
	raceReleaseIO()
	n := w.charge
	var err error
	hook := false
	if len(w.lent) > 0 {
		if waitHook && c.direct != nil {
			// Lent bytes the socket does not take at once are copied
			// before writeBuffers waits (settleRest): the common write,
			// taken whole, costs nothing more.
			hook = true
			w.pieces = len(w.iov)
			if w.settleFn == nil {
				w.settleFn = w.settleRest
			}
			c.direct.beforeWait = w.settleFn
		} else {
			err = w.settleLent(c.direct)
		}
	}
	if err == nil && len(w.iov) > 0 {
		w.out = w.iov
		err = writeBuffers(c.direct, c.nc, &w.out)
		w.out = nil
	}
	if hook {
		c.direct.beforeWait = nil
	}
	w.drop() // ends the loans not ended yet: written, or dropped
	return n, err
}

// settleRest is settleLent for a write that must wait for room: rest is
// what is left to write of w.iov (a suffix of it, in its array, the first
// piece maybe cut); the lent bytes in it are copied into w.own, and every
// loan of the batch ends, before the writer waits for the network.
func (w *vectorWriter) settleRest(rest [][]byte) {
	first := w.pieces - len(rest) // w.iov's index of rest[0]
	need := 0
	for _, k := range w.lent {
		if k >= first {
			need += len(rest[k-first])
		}
	}
	lentCopies.Add(int64(need))
	if need > 0 {
		if cap(w.own) < need {
			w.own = growExact(nil, need)
		}
		own := w.own[:0]
		for _, k := range w.lent {
			if k >= first {
				at := len(own)
				own = append(own, rest[k-first]...) // within cap: no new array
				rest[k-first] = own[at:len(own):len(own)]
			}
		}
		w.own = own
	}
	for _, f := range w.frames {
		f.endLoan()
	}
	w.lent = w.lent[:0]
}

// lentCopies counts the lent bytes writers copied before a wait (tests).
var lentCopies atomic.Int64

// ownMax is the largest array of copies a vectorWriter keeps.
const ownMax = 256 << 10

// settleLent ends the loans of the batch's lent frames before the writer
// may wait for the network, which nothing bounds (a peer that stops
// reading): one writev that does not wait writes what the socket takes,
// and the borrowed bytes it leaves are copied into w.own, so that w.iov
// then holds what is left to write, in memory the connection owns. With
// d nil (no such writev) all borrowed bytes are copied.
func (w *vectorWriter) settleLent(d *directWrite) error {
	n := 0
	if d != nil {
		var err error
		if n, err = d.writeBufs(w.iov); err != nil {
			return err
		}
	}
	first := 0 // the first piece not written whole
	for first < len(w.iov) && n >= len(w.iov[first]) {
		n -= len(w.iov[first])
		first++
	}
	if first < len(w.iov) {
		w.iov[first] = w.iov[first][n:]
	}
	w.pieces = len(w.iov)
	w.settleRest(w.iov[first:])
	left := copy(w.iov, w.iov[first:])
	clear(w.iov[left:])
	w.iov = w.iov[:left]
	return nil
}

// drop releases the frames held without writing them.
func (w *vectorWriter) drop() {
	for i, f := range w.frames {
		f.Release()
		w.frames[i] = nil
	}
	clear(w.iov)
	w.frames, w.iov, w.bytes, w.charge, w.lent = w.frames[:0], w.iov[:0], 0, 0, w.lent[:0]
	if cap(w.own) > ownMax {
		w.own = nil
	}
}

// writeVectored is writeQueued for connections that write a batch with one
// writev: the frames are written from their own buffers. A batch is written
// when the queue is empty (after one yield, as in writeQueued) or when it
// reaches maxVectorParts buffers or maxVectorBytes.
func (c *Conn) writeVectored(w *vectorWriter, batch *[]*Buffer) error {
	yielded, own := false, false
	for {
		c.mu.Lock()
		if c.writing && !own {
			// A SendNow writes; it wakes the writer if it leaves
			// anything queued.
			c.mu.Unlock()
			return nil
		}
		q := c.queue
		c.queue = (*batch)[:0]
		if len(q) == 0 && len(w.frames) == 0 {
			c.writing = false
			c.mu.Unlock()
			*batch = q
			return nil
		}
		c.writing, own = true, true
		c.mu.Unlock()
		if len(q) == 0 {
			*batch = q
			if !yielded {
				yielded = true
				runtime.Gosched()
				continue
			}
			n, err := w.write(c)
			c.writerWrites.Add(1)
			c.dequeued(n)
			if err != nil {
				return err
			}
			yielded = false // the next batch gathers as this one did
			continue
		}
		for i, f := range q {
			q[i] = nil
			if !f.take() {
				// Withdrawn by its lender: not a byte of it is written.
				c.dequeued(f.charge)
				f.Release()
				continue
			}
			w.add(f)
			if len(w.iov) >= maxVectorParts || w.bytes >= maxVectorBytes {
				n, err := w.write(c)
				c.writerWrites.Add(1)
				c.dequeued(n)
				if err != nil {
					for _, g := range q[i+1:] {
						g.Release()
					}
					clear(q)
					*batch = q
					return err
				}
			}
		}
		*batch = q
	}
}

// awaitDirect waits until a SendNow in progress has made its one write
// (which does not wait for the socket), for at most closeFlushTimeout.
func (c *Conn) awaitDirect() {
	deadline := time.Now().Add(closeFlushTimeout)
	for {
		c.mu.Lock()
		busy := c.writing
		c.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
}

func (c *Conn) dropQueued() {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.dropped = true
	c.mu.Unlock()
	releaseAll(q)
}

func releaseAll(q []*Buffer) {
	for _, f := range q {
		f.Release()
	}
}
