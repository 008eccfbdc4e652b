package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/peertext"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// readOnlyEvent is the body of the event a server sends when it shuts down.
const readOnlyEvent = "R"

// Client makes calls over one connection; many goroutines may call at once
// and their requests share the connection. Every call ends in exactly one
// of: its response, its deadline (status.ErrTimeout), the connection's death
// (status.ErrConnLost) or Close (status.ErrClosed).
//
// A Client does not reconnect: once its connection is gone every call fails
// with an error wrapping status.ErrClosed, and protocol/dubbo dials a new one.
type Client struct {
	opts   Options
	conn   *transport.Conn
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*call
	err     error // set once the connection is gone
	// timed holds the pending calls that have a deadline (synchronous
	// calls and futures alike), soonest first; one timer (expiry), armed for the soonest, ends them
	// at their deadlines, instead of a timer per call.
	timed   deadlines
	expiry  *time.Timer
	armedAt int64 // when expiry fires (clock), 0 when it is not armed
	// answered counts the calls answered since a request last went out
	// (see prepare).
	answered int
	// The response in progress as expire last saw it (transport's
	// Reading) and since when (clock): see stuckBehind.
	stuckFrame, stuckCame, stuckSince int64

	// The connection's reading role (transport's Detach and Resume),
	// under mu: who holds it (role), the call whose caller reads when
	// that is a caller (leader), and how many times a caller took it
	// (takes, which the standby goroutine compares between its ticks).
	// See lead.
	role    int8
	leader  *call
	takes   uint64
	canLead bool // the connection is a plain socket
	// parked: the standby goroutine armed no timer while the leader
	// reads with no context to watch; handOn wakes it.
	parked  bool
	standby chan struct{} // wakes the standby goroutine; 1 slot

	readOnly atomic.Bool
	late     atomic.Uint64
	// strayed is set once a response came for an id this client never
	// sent (logged once).
	strayed atomic.Bool
	inline  atomic.Uint64 // requests their callers wrote (tests, benchmarks)
	led     atomic.Uint64 // calls whose callers read the connection (tests, benchmarks)
	stops   atomic.Uint64 // reading callers stopped by their deadlines or contexts (tests)
	wg      sync.WaitGroup
}

// Holders of a client's reading role.
const (
	// roleLoop: the connection's own read loop, as it starts.
	roleLoop int8 = iota
	// roleStandby: the client's standby goroutine (handed the role, or
	// it took the role when nobody had for a tick).
	roleStandby
	// roleFree: nobody; the next synchronous call to find it free reads.
	roleFree
	// roleLeader: the caller of c.leader, until its call ends.
	roleLeader
	// roleEnded: the connection has ended (its Closed handler ran).
	roleEnded
)

// standbyTick is how often the standby goroutine looks at a reading role
// that callers take and give back: one left free for a whole tick (no
// call took it since the last look) it takes, so that a frame nobody
// waits for (a heartbeat, the provider's read-only event, the end of the
// connection) is read within two ticks. While callers keep taking the
// role between its looks, the tick doubles, up to standbyTickMax: every
// look is a timer and a wake-up of the standby goroutine (often of a
// thread), which a caller that calls again and again would otherwise pay
// for 500 times a second. (Variables for tests.)
var (
	standbyTick    = 2 * time.Millisecond
	standbyTickMax = 16 * time.Millisecond
)

// standbyIdleTicks is how many whole ticks a role must stay free before
// the standby goroutine takes it (a variable for tests).
var standbyIdleTicks = 1

// call is one pending request. Synchronous calls take it from a pool and
// reuse its channel; asynchronous ones own theirs.
type call struct {
	done  chan struct{}
	frame *transport.Buffer
	err   error

	async   bool
	stopCtx func() bool

	// loan is what a synchronous call's spliced request bytes are lent
	// under (transport.Buffer.Lend): settled before the call returns.
	loan transport.Loan

	// A call with a deadline: its place in Client.timed (-1
	// when not there), the deadline (clock) and, for its timeout error,
	// how long it was given and whether by the context.
	slot     int
	id       uint64
	deadline int64
	d        time.Duration
	fromCtx  bool

	// ctx is the context of a call whose caller reads the connection
	// (lead), which the standby goroutine watches.
	ctx context.Context
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1), slot: -1} }}

// epoch is the origin of clock.
var epoch = time.Now()

// clock reads the monotonic clock, in nanoseconds since epoch.
func clock() int64 { return int64(time.Since(epoch)) }

// Now returns the current time from the monotonic clock alone: a Time
// whose monotonic reading is exact and whose wall time is estimated from
// it (exact unless the wall clock was set since the process started). It
// is for measuring and for deadlines (Sub, Until and comparisons with
// times that have a monotonic reading use that reading); on a virtual
// machine it costs about half of time.Now, which reads both clocks.
func Now() time.Time { return epoch.Add(time.Since(epoch)) }

// deadlines is a binary heap of calls by deadline; each call knows its
// slot, so that a call that ends otherwise leaves it in O(log n).
type deadlines []*call

func (h deadlines) less(i, j int) bool { return h[i].deadline < h[j].deadline }

func (h deadlines) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i, j
}

func (h deadlines) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h deadlines) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *deadlines) push(cl *call) {
	cl.slot = len(*h)
	*h = append(*h, cl)
	h.up(cl.slot)
}

// drop takes cl out of the heap, if it is there.
func (h *deadlines) drop(cl *call) {
	i := cl.slot
	if i < 0 {
		return
	}
	cl.slot = -1
	last := len(*h) - 1
	if i != last {
		(*h)[i] = (*h)[last]
		(*h)[i].slot = i
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
}

// finish hands the outcome to the waiter; it runs once per call, by whoever
// removed the call from the pending map.
func (cl *call) finish() {
	if !cl.async {
		cl.done <- struct{}{}
		return
	}
	if cl.stopCtx != nil {
		cl.stopCtx()
	}
	close(cl.done)
}

// Dial connects to addr and returns a Client over the connection; opts may
// be nil. A failure wraps status.ErrDial.
func Dial(ctx context.Context, addr string, opts *Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := newClient(opts)
	to := c.opts.transport()
	to.Budget = c.opts.ReplyBudget // never a Server's (Budget)
	conn, err := transport.Dial(ctx, addr, clientHandler{c}, to)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", status.ErrDial, addr, err)
	}
	c.start(conn)
	return c, nil
}

// NewClient returns a Client over nc, which is ready for use (for example
// one end of net.Pipe); opts may be nil and its TLS field is ignored.
func NewClient(nc net.Conn, opts *Options) *Client {
	c := newClient(opts)
	c.start(transport.NewConn(nc, clientHandler{c}, c.opts.transport()))
	return c
}

func newClient(opts *Options) *Client {
	return &Client{opts: opts.withDefaults(), pending: map[uint64]*call{}, standby: make(chan struct{}, 1)}
}

func (c *Client) start(conn *transport.Conn) {
	c.mu.Lock()
	c.conn = conn
	c.canLead = conn.Plain()
	c.mu.Unlock()
	ticks, stop := heartbeatTicks(max(c.opts.Heartbeat/4, time.Millisecond))
	clock := heartbeatClock
	c.wg.Go(func() {
		defer stop()
		c.heartbeat(ticks, clock)
	})
	if c.canLead {
		c.wg.Go(c.standbyLoop)
	}
}

// LocalAddr returns the local address of the connection.
func (c *Client) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the provider's address.
func (c *Client) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// Done is closed when the connection starts closing, for any reason.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err returns why the client stopped working (wrapping status.ErrClosed), or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil {
		select {
		case <-c.conn.Done():
			// Closed, and the close handler has not said why yet: the
			// connection knows (a TLS alert from the provider, say).
			if cerr := c.conn.Err(); cerr != nil && !errors.Is(cerr, transport.ErrClosed) {
				return fmt.Errorf("%w (%w)", status.ErrClosed, namedErr(c.conn, cerr))
			}
			return status.ErrClosed
		default:
		}
	}
	return err
}

// ReadOnly reports whether the provider announced that it is shutting down.
func (c *Client) ReadOnly() bool { return c.readOnly.Load() }

// Available reports whether the client takes new calls: its connection is
// up and the provider has not announced that it is shutting down.
func (c *Client) Available() bool { return !c.readOnly.Load() && c.Err() == nil }

// Late returns how many responses arrived after their call had ended (by
// timeout or cancellation) and were dropped, with the responses for ids
// the client never sent, which a broken or hostile provider may send.
// Each costs one read of the frame, released at once; the connection is
// kept (the first for an id never sent is logged, once per client).
func (c *Client) Late() uint64 { return c.late.Load() }

// Pending returns the number of calls waiting for a response.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close closes the connection, fails every pending call with status.ErrClosed and
// waits for the client's goroutines. It is idempotent.
func (c *Client) Close() error {
	c.conn.Close()
	c.wg.Wait()
	return nil
}

// deadline returns how long a call may take: the sooner of ctx's deadline
// and timeout (when positive); ok is false when there is neither, fromCtx
// true when ctx's deadline is the sooner.
func deadline(ctx context.Context, timeout time.Duration) (d time.Duration, ok, fromCtx bool) {
	var now time.Time
	return deadlineFrom(ctx, timeout, &now)
}

// deadlineFrom is deadline for a call that starts at *now; when ctx has a
// deadline and *now is zero, it reads the clock into *now.
func deadlineFrom(ctx context.Context, timeout time.Duration, now *time.Time) (d time.Duration, ok, fromCtx bool) {
	if dl, has := ctx.Deadline(); has {
		if now.IsZero() {
			*now = Now()
		}
		d = dl.Sub(*now)
		if timeout <= 0 || d < timeout {
			return d, true, true
		}
	}
	return timeout, timeout > 0, false
}

// ctxLeft is how long ctx allowed a call that was given d (fromCtx: d
// came from ctx's deadline).
func ctxLeft(ctx context.Context, d time.Duration, fromCtx bool) time.Duration {
	if fromCtx {
		return d
	}
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), 0)
	}
	return 0
}

// prepare checks that a request may be sent, fills in f's header,
// registers cl under a new id and queues f, waiting for room in the
// connection's write queue until ctx is done or deadline (when not zero)
// passes: a busy provider makes calls wait, not fail. d and fromCtx
// describe the call's deadline, for its timeout error. On error it
// releases f.
func (c *Client) prepare(ctx context.Context, deadline time.Time, d time.Duration, fromCtx bool, cl *call, ser byte, f *transport.Buffer) (uint64, error) {
	if c.readOnly.Load() {
		f.Release()
		return 0, status.ErrReadOnly
	}
	if n := f.Len() - HeaderSize; n > c.opts.MaxPayload {
		f.Release()
		return 0, fmt.Errorf("%w: request of %d bytes, limit %d", status.ErrPayloadTooLarge, n, c.opts.MaxPayload)
	}
	id := c.nextID.Add(1)
	h := Header{Request: true, TwoWay: true, Serializer: ser, ID: id, Length: uint32(f.Len() - HeaderSize)}
	h.Put(f.B)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		f.Release()
		return 0, err
	}
	select {
	case <-c.conn.Done():
		// Closing, its Closed handler yet to run (Available says false
		// already): the call is not sent. Registered, it could be failed
		// by that handler with ErrConnLost, which says "sent".
		c.mu.Unlock()
		f.Release()
		return 0, c.Err()
	default:
	}
	c.pending[id] = cl
	cl.id = id
	// alone: no other call of this client waits for its response, and
	// at most one response (the previous call's, a lone caller's own)
	// arrived since the last request went out: one caller uses the
	// connection, and no other request is about to be written with this
	// one. The caller then writes its own, without a hand-off to the
	// connection's writer (transport's WriteNow, which leaves it to the
	// writer when anything is being written or queued). Otherwise the
	// writer sends the requests that come together with one writev: with
	// calls in flight, and also when the responses of several callers
	// arrived together, as they come back together.
	alone := len(c.pending) == 1 && c.answered <= 1
	c.answered = 0
	if !deadline.IsZero() {
		c.timed.push(cl)
		if c.armedAt == 0 || cl.deadline < c.armedAt {
			c.arm(cl.deadline)
		}
	}
	c.mu.Unlock()
	if testHookRegistered != nil {
		testHookRegistered(c)
	}
	var err error
	taken := false
	if alone {
		taken, err = c.conn.WriteNow(f)
		if taken {
			c.inline.Add(1)
		}
	}
	if !taken {
		err = c.conn.SendWait(ctx, deadline, f)
	}
	if err != nil {
		// Not sent: a WriteNow that failed wrote nothing.
		switch {
		case ctx.Err() != nil:
			err = ctxError(ctx, ctxLeft(ctx, d, fromCtx))
		case errors.Is(err, context.DeadlineExceeded):
			err = timeoutError(d, fromCtx)
		default:
			err = fmt.Errorf("%w: %w", status.ErrClosed, err)
		}
		if !c.remove(id) {
			// The connection's Closed handler (or the expiry timer) took
			// the call first and is ending it, with ErrConnLost ("sent,
			// may have run") from the handler; but its frame was never
			// queued. Wait for that ending and report it as not sent:
			// a synchronous call's token is taken so the call can be
			// reused, an asynchronous one's done is left closed (Go).
			<-cl.done
			cl.err = nil
		}
		return 0, err
	}
	return id, nil
}

// testHookRegistered, when set (by tests only), runs in prepare between
// registering a call and queueing its frame.
var testHookRegistered func(*Client)

// remove takes id out of the pending map; it reports whether it was there,
// in which case the caller owns the call's completion.
func (c *Client) remove(id uint64) bool {
	c.mu.Lock()
	cl, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
		c.timed.drop(cl)
	}
	c.mu.Unlock()
	return ok
}

// arm sets the expiry timer to fire at clock time at; c.mu is held.
func (c *Client) arm(at int64) {
	c.armedAt = at
	d := time.Duration(at - clock())
	if c.expiry == nil {
		c.expiry = time.AfterFunc(d, c.expire)
		return
	}
	c.expiry.Reset(d)
}

// expire ends the calls whose deadline has passed with their timeout
// errors, and arms the timer for the next deadline.
func (c *Client) expire() {
	var ended []*call
	// Read before a reading caller is stopped: its wait ends then.
	waited := c.opts.ReplyBudget != nil && c.conn.Throttled()
	c.mu.Lock()
	c.armedAt = 0
	now := clock()
	for len(c.timed) > 0 && c.timed[0].deadline <= now {
		cl := c.timed[0]
		c.timed.drop(cl)
		delete(c.pending, cl.id)
		ended = append(ended, cl)
		if cl == c.leader {
			c.stopLeader() // its caller reads: it stops, and hands the role on
		}
	}
	if len(c.timed) > 0 && c.err == nil {
		c.arm(c.timed[0].deadline)
	}
	var stuck error
	if len(ended) > 0 {
		stuck = c.stuckBehind(now, ended[0].d)
	}
	c.mu.Unlock()
	if stuck != nil {
		// Its pending calls fail now (the Closed handler), and the
		// protocol above dials again, instead of queueing calls behind
		// the frame until FrameTimeout.
		c.conn.Abort(stuck)
	}
	for _, cl := range ended {
		cl.err = timeoutError(cl.d, cl.fromCtx)
		if waited {
			cl.err = c.waitedError(cl.err)
		}
		cl.finish()
	}
}

// stuckBehind is expire's look at the response in progress (transport's
// Reading: every response whose body comes from the network, charged to
// a ReplyBudget or not) when calls time out: when the same response got
// no byte between two
// looks at least max(d, FrameTimeout/10) apart (d: the timeout of a call
// that just ended), calls are timing out behind a response that stopped,
// and it returns the error to close the connection with. The floor keeps
// a short call timeout from cutting an honest response over one lost
// packet's retransmission; bytes waiting unread in the socket, or that
// a read is taking from it, count as come (this process is late, not the
// provider). c.mu is held.
func (c *Client) stuckBehind(now int64, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	p := c.conn.Reading()
	if p.Frame == 0 || p.Frame != c.stuckFrame || p.Came != c.stuckCame || p.Behind() {
		c.stuckFrame, c.stuckCame, c.stuckSince = p.Frame, p.Came, now
		return nil
	}
	quiet := time.Duration(now - c.stuckSince)
	if quiet < max(d, c.opts.FrameTimeout/10) {
		return nil
	}
	sent := fmt.Sprintf("%d bytes of a response's body", p.Arrived)
	if p.Size == 0 {
		sent = "part of a response's header"
	}
	return fmt.Errorf("%w: provider %s sent %s and nothing more for at least %v while calls behind it timed out (FrameTimeout %v would have waited longer; if the provider is honest but pauses this long mid-response, raise FrameTimeout: calls behind a response give it a tenth of that at least, or their own timeout if longer)",
		status.ErrConnLost, c.conn.RemoteAddr(), sent, quiet.Round(time.Millisecond), c.opts.FrameTimeout)
}

// waitedError is err, a call's timeout while the connection waited for
// room in the ReplyBudget, saying so: responses are not read meanwhile.
func (c *Client) waitedError(err error) error {
	b := c.opts.ReplyBudget
	return &waitedError{err, fmt.Sprintf("; its response was not read: the connection to provider %s stopped reading because the responses in progress across the consumer held its memory for them (%d of %d bytes held: ReplyBudget's limit, dubbo.Options.MaxReplyMemory; raise it if the providers are honest)",
		c.conn.RemoteAddr(), b.Used(), b.Limit())}
}

// waitedError is a timeout (err) with why (more), which it reads when it
// is printed: the layer above fills in the call's name and setting.
type waitedError struct {
	err  error
	more string
}

func (e *waitedError) Error() string { return e.err.Error() + e.more }
func (e *waitedError) Unwrap() error { return e.err }

// Call sends the request frame f (built with NewFrame, body appended,
// serialized with serializer id ser) and waits for the response. It takes
// ownership of f. The call's deadline is the sooner of ctx's deadline and
// timeout (when positive); with neither it waits until the response or the
// connection's end.
//
// It returns the response frame, which the caller must Release; Body gives
// its body. A non-OK status is returned as a *status.Error.
//
// f may have spliced bytes (transport.Buffer.Splice), the caller's own
// memory, written without a copy: they are the caller's again when Call
// returns, however it ends (a timeout or a cancelled context too, with
// the request still queued or being written). The connection never reads
// them after that: a request still queued is withdrawn whole (never
// sent), and a writer that would wait for the network with some of them
// unwritten copies those first.
func (c *Client) Call(ctx context.Context, timeout time.Duration, ser byte, f *transport.Buffer) (*transport.Buffer, error) {
	return c.CallAt(ctx, time.Time{}, timeout, ser, f)
}

// CallAt is Call for a caller that has read the clock already: the call's
// timeout runs from now (zero: Call's own reading of the clock), so that a
// caller that has worked out its deadline too need not read it again.
func (c *Client) CallAt(ctx context.Context, now time.Time, timeout time.Duration, ser byte, f *transport.Buffer) (*transport.Buffer, error) {
	d, hasDeadline, fromCtx := deadlineFrom(ctx, timeout, &now)
	if hasDeadline && d <= 0 {
		f.Release()
		return nil, timeoutError(d, fromCtx)
	}
	cl := calls.Get().(*call)
	if f.Spliced() {
		// The caller's bytes: the connection gives them back (Settle
		// below) before the call returns, however it ends.
		f.Lend(&cl.loan)
	}
	var dl time.Time
	if hasDeadline {
		// The client's expiry timer ends the call at dl (see expire).
		if now.IsZero() {
			now = Now()
		}
		dl = now.Add(d)
		cl.deadline, cl.d, cl.fromCtx = int64(dl.Sub(epoch)), d, fromCtx
	}
	id, err := c.prepare(ctx, dl, d, fromCtx, cl, ser, f)
	if err != nil {
		cl.loan.Settle() // f was released: the loan ended
		calls.Put(cl)
		return nil, err
	}
	if c.takeLead(ctx, cl, id, d, fromCtx) {
		c.lead(ctx, cl, id, d, fromCtx)
	} else if done := ctx.Done(); done == nil {
		<-cl.done
	} else {
		select {
		case <-cl.done:
		case <-done:
			if c.remove(id) {
				cl.err = ctxError(ctx, ctxLeft(ctx, d, fromCtx))
			} else {
				<-cl.done
			}
		}
	}
	cl.loan.Settle() // one atomic load once the request is written
	resp, err := cl.frame, cl.err
	cl.frame, cl.err = nil, nil

	calls.Put(cl)
	if err != nil {
		return nil, err
	}
	return c.checkStatus(resp)
}

// timeoutError is the error of a call whose deadline passed after d: the
// context's deadline when fromCtx, else the call's timeout (whose source
// the protocol layer fills in).
func timeoutError(d time.Duration, fromCtx bool) error {
	e := &status.TimeoutError{Timeout: max(d, 0), Side: status.Consumer}
	if fromCtx {
		e.Source = status.SourceContext
	}
	return e
}

// ctxError is the error of a call whose context ended first; d is how long
// the context allowed when the call started.
func ctxError(ctx context.Context, d time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &status.TimeoutError{Timeout: d, Side: status.Consumer, Source: status.SourceContext}
	}
	return fmt.Errorf("exchange: call abandoned: %w", context.Cause(ctx))
}

// MaxStatusMessage bounds the message of a non-OK response, which is
// the provider's text: a longer one is cut (saying how many bytes were),
// and control characters other than newline and tab, and invalid UTF-8,
// become U+FFFD, so that a provider cannot put megabytes or terminal
// escapes into a caller's errors and logs.
const MaxStatusMessage = 4 << 10

// checkStatus returns resp if its status is OK, else releases it and
// returns its *status.Error; one of a status no provider of this
// framework sends (which matches status.ErrBadResponse) says so, and
// names the provider.
func (c *Client) checkStatus(resp *transport.Buffer) (*transport.Buffer, error) {
	st := status.Code(resp.B[3])
	if st == status.OK {
		return resp, nil
	}
	err := &status.Error{Code: st, Message: peertext.String(Body(resp), MaxStatusMessage)}
	if st.Err() == status.ErrBadResponse && st != status.BadResponse {
		err.Message = fmt.Sprintf("provider %s answered with unknown status %d: %q", c.conn.RemoteAddr(), byte(st), err.Message)
	}
	resp.Release()
	return nil, err
}

// Future is the pending result of an asynchronous call.
type Future struct {
	c     *Client
	cl    *call
	taken atomic.Bool
}

// Done is closed when the call has ended.
func (f *Future) Done() <-chan struct{} { return f.cl.done }

// Result waits for the call to end and returns what Call would have
// returned. The response frame is handed out once; later calls return an
// error.
func (f *Future) Result() (*transport.Buffer, error) {
	<-f.cl.done
	if f.cl.err != nil {
		return nil, f.cl.err
	}
	if f.taken.Swap(true) {
		return nil, errResultTaken
	}
	resp := f.cl.frame
	f.cl.frame = nil
	return f.c.checkStatus(resp)
}

var errResultTaken = errors.New("exchange: the future's result was already taken")

// Go is Call without the wait: it sends the request and returns a Future
// that ends like Call would. The deadline runs from now; cancelling ctx
// ends the call. Spliced bytes of f are copied into the frame before Go
// returns, so the caller may reuse them at once, as after Call.
func (c *Client) Go(ctx context.Context, timeout time.Duration, ser byte, f *transport.Buffer) *Future {
	// A future may outlive its caller's use of the request's memory:
	// spliced bytes are copied into the frame before anything is sent.
	f.Own()
	cl := &call{done: make(chan struct{}), async: true, slot: -1}
	fut := &Future{c: c, cl: cl}
	d, hasDeadline, fromCtx := deadline(ctx, timeout)
	if hasDeadline && d <= 0 {
		f.Release()
		cl.err = timeoutError(d, fromCtx)
		close(cl.done)
		return fut
	}
	if ctx.Err() != nil {
		// Ended already: not sent, or a quick answer could beat the
		// context's callback below.
		f.Release()
		cl.err = ctxError(ctx, ctxLeft(ctx, d, fromCtx))
		close(cl.done)
		return fut
	}
	// The id is known only after prepare; the context's callback may run
	// before, and then the check after prepare ends the call. The deadline
	// is the client's expiry timer's, as for Call.
	var id atomic.Uint64
	end := func(err error) {
		if n := id.Load(); n != 0 && c.remove(n) {
			cl.err = err
			cl.finish()
		}
	}
	if ctx.Done() != nil {
		cl.stopCtx = context.AfterFunc(ctx, func() { end(ctxError(ctx, ctxLeft(ctx, d, fromCtx))) })
	}
	var dl time.Time
	if hasDeadline {
		dl = time.Now().Add(d)
		cl.deadline, cl.d, cl.fromCtx = int64(dl.Sub(epoch)), d, fromCtx
	}
	n, err := c.prepare(ctx, dl, d, fromCtx, cl, ser, f)
	if err != nil {
		if cl.stopCtx != nil {
			cl.stopCtx()
		}
		cl.err = err
		select {
		case <-cl.done: // ended by the connection's death while not queued (prepare)
		default:
			close(cl.done)
		}
		return fut
	}
	id.Store(n)
	c.wakeReader()
	if ctx.Err() != nil {
		end(ctxError(ctx, ctxLeft(ctx, d, fromCtx)))
	}
	return fut
}

// complete ends the call id with frame f, or counts f as late.
func (c *Client) complete(id uint64, f *transport.Buffer) {
	c.mu.Lock()
	cl := c.pending[id]
	if cl != nil {
		delete(c.pending, id)
		c.timed.drop(cl)
		c.answered++
		c.served(cl)
	}
	c.mu.Unlock()
	if cl == nil {
		c.late.Add(1)
		f.Release()
		if id > c.nextID.Load() && !c.strayed.Swap(true) {
			c.opts.Logger.Warn("provider answered a request this consumer never sent (dropped, counted in Late; logged once per connection)",
				zap.Stringer("provider", c.conn.RemoteAddr()), zap.Uint64("id", id))
		}
		return
	}
	cl.frame = f
	cl.finish()
}

// heartbeatTicks makes the ticks of a client's heartbeat goroutine, four
// a heartbeat interval; a test replaces it to deliver ticks late, as a
// goroutine that was not run for a while receives them.
var heartbeatTicks = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// heartbeatClock is what a client's heartbeat goroutine takes as the time
// of a tick: the clock when it handles the tick. (A tick's own time is when
// it was due; a goroutine run late would then count the time it was not
// run against the heartbeat it sends on that tick.) A test that delivers
// the ticks replaces it to have the client judge by the times it sends.
var heartbeatClock = func(time.Time) time.Time { return time.Now() }

// heartbeat sends a heartbeat on each tick while nothing was read for a
// heartbeat interval, and aborts the connection when nothing was read for
// 2.5 intervals and the first heartbeat sent since has gone unanswered for
// 1.5. The second condition keeps a goroutine that was not run for longer
// than that (a machine loaded with other work, a pause of the process)
// from taking a live peer as dead without having asked it.
func (c *Client) heartbeat(ticks <-chan time.Time, clock func(tick time.Time) time.Time) {
	hb := c.opts.Heartbeat
	dead := hb*5/2 + 1
	var asked time.Time // the first heartbeat sent since the last read
	for {
		select {
		case <-c.conn.Done():
			return
		case tick := <-ticks:
			now, last := clock(tick), c.conn.LastRead()
			if last.After(asked) {
				asked = time.Time{} // read since (or never asked)
			}
			idle := now.Sub(last)
			if idle >= dead && !asked.IsZero() && now.Sub(asked) >= dead-hb && !c.conn.Throttled() {
				// (Not while reading waits for the ReplyBudget: the
				// provider's answer is unread, not missing; FrameTimeout
				// bounds the frames in progress that hold it.)
				c.conn.Abort(fmt.Errorf("%w: nothing from %s for %v", status.ErrConnLost, c.conn.RemoteAddr(), idle.Round(time.Millisecond)))
				return
			}
			if idle >= hb {
				f := NewFrame()
				h := Header{Request: true, TwoWay: true, Event: true, ID: c.nextID.Add(1)}
				h.Put(f.B)
				_ = c.conn.Send(f)
				if asked.IsZero() {
					asked = now
				}
			}
		}
	}
}

// heartbeatQueueMax: a client answers a provider's heartbeat only while
// no more than this waits to be written on the connection. More means the
// provider is not reading, and the answer would only add to what it does
// not read: a provider that sent heartbeats and read nothing made the
// client queue an answer (about 1 KiB with its buffer) per heartbeat,
// 64 MiB (MaxQueue) per connection, before it closed the connection. A
// provider that reads gets every answer, and one that is slow to read
// ours still reads our other bytes (which is what tells it we are alive).
const heartbeatQueueMax = 64 << 10

type clientHandler struct{ c *Client }

func (h clientHandler) Serve(conn *transport.Conn, f *transport.Buffer) {
	hdr, err := ParseHeader(f.B)
	switch {
	case err != nil:
		f.Release()
		conn.Abort(err)
	case hdr.Event:
		if hdr.Request {
			if string(Body(f)) == readOnlyEvent {
				h.c.readOnly.Store(true)
			} else if hdr.TwoWay && conn.Queued() <= heartbeatQueueMax {
				answerHeartbeat(conn, hdr)
			}
		}
		f.Release()
	case hdr.Request:
		f.Release() // a client serves no requests
	default:
		h.c.complete(hdr.ID, f)
	}
}

func (h clientHandler) Closed(conn *transport.Conn, err error) {
	c := h.c
	var callErr, clientErr error
	if errors.Is(err, transport.ErrClosed) {
		callErr, clientErr = status.ErrClosed, status.ErrClosed
	} else {
		err = namedErr(conn, err)
		if !errors.Is(err, status.ErrConnLost) {
			err = fmt.Errorf("%w: %w", status.ErrConnLost, err)
		}
		callErr, clientErr = err, fmt.Errorf("%w (%w)", status.ErrClosed, err)
	}
	c.mu.Lock()
	c.err = clientErr
	c.role, c.leader = roleEnded, nil // Closed runs on the role's last holder
	pending := c.pending
	c.pending = map[uint64]*call{}
	for _, cl := range c.timed {
		cl.slot = -1
	}
	c.timed = nil
	if c.expiry != nil {
		c.expiry.Stop()
		c.armedAt = 0
	}
	c.mu.Unlock()
	for _, cl := range pending {
		cl.err = callErr
		cl.finish()
	}
	c.wakeStandby() // to end
	if testHookClosed != nil {
		testHookClosed(c)
	}
}

// namedErr is err, why conn ended, naming the provider when it does not
// already: whose bytes were wrong (a bad magic, a frame over the limit,
// the end of the stream, answers it does not read) is the provider's.
func namedErr(conn *transport.Conn, err error) error {
	if addr := conn.RemoteAddr().String(); !strings.Contains(err.Error(), addr) {
		return fmt.Errorf("provider %s: %w", addr, err)
	}
	return err
}

// testHookClosed, when set (by tests only), runs at the end of the
// client's Closed handler.
var testHookClosed func(*Client)

func answerHeartbeat(conn *transport.Conn, req Header) {
	f := NewFrame()
	h := Header{Event: true, Status: status.OK, ID: req.ID, Serializer: req.Serializer}
	h.Put(f.B)
	_ = conn.Send(f)
}
