package dubbo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// poolKey tells pools apart: by provider address and, for invokers with
// their own TLS configuration (ReferTLS), by that configuration.
type poolKey struct {
	addr string
	tls  *tls.Config
}

// pool holds the connections to one provider address, shared by every
// invoker referring it with the same TLS configuration.
type pool struct {
	key   poolKey
	refs  int // under Protocol.mu
	conns []*lazyConn
	next  atomic.Uint32
}

// fillLimit is how many calls a connection of a pool takes before the
// next calls spread over every connection (see pool.pick).
const fillLimit = 16

// pick returns the connection for the next call: the first one with fewer
// than fillLimit calls in flight, else the next in turn. Calls that fit on
// one connection share it, and its writes: the frames queued while its
// writer wakes go out in one writev, and the provider reads them in one
// read, where calls spread over every connection would each pay a write, a
// read and a wake-up on both sides. Under more load than that every
// connection is used, in turn, as before.
func (pl *pool) pick() *lazyConn {
	if len(pl.conns) == 1 {
		return pl.conns[0]
	}
	for _, c := range pl.conns {
		if c.inflight.Load() < fillLimit && c.available() {
			return c
		}
	}
	return pl.conns[pl.next.Add(1)%uint32(len(pl.conns))]
}

func (pl *pool) available() bool {
	for _, c := range pl.conns {
		if c.available() {
			return true
		}
	}
	return false
}

func (pl *pool) close() {
	for _, c := range pl.conns {
		c.close()
	}
}

// lazyConn is one connection to a provider: dialled on the first call, and
// re-dialled in the background (with backoff) when it breaks.
type lazyConn struct {
	p    *Protocol
	addr string
	tls  *tls.Config // nil: plain TCP
	cur  atomic.Pointer[exchange.Client]
	// inflight counts the calls that picked this connection and have not
	// ended.
	inflight atomic.Int32

	// unusable mirrors down != nil || closed, for available(), which must
	// not wait for c.mu while a dial holds it.
	unusable atomic.Bool

	mu      sync.Mutex
	dialled bool          // a dial was attempted
	dialing chan struct{} // closed when the first dial ends
	down    error         // why no connection is up, while reconnecting
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newLazyConn(p *Protocol, addr string, cfg *tls.Config) *lazyConn {
	return &lazyConn{p: p, addr: addr, tls: cfg, stop: make(chan struct{})}
}

func alive(c *exchange.Client) bool {
	if c == nil {
		return false
	}
	select {
	case <-c.Done():
		return false
	default:
		return true
	}
}

// get returns the connection for a call, dialling it on the first call.
// A call that has to wait for the first dial waits at most as long as its
// own timeout t allows (and its context); waited is how long it waited,
// which the call's timeout has then spent.
func (c *lazyConn) get(ctx context.Context, t timeoutSetting) (cl *exchange.Client, waited time.Duration, err error) {
	if cl := c.cur.Load(); alive(cl) {
		return cl, 0, nil
	}
	// The call's timeout runs from here: before this call may start the
	// dial, so that the wait it measures is all the wait the call had.
	start := time.Now()
	cl, err = c.connect(ctx, t, start)
	return cl, time.Since(start), err
}

// connect is get's slow path: no connection is up.
func (c *lazyConn) connect(ctx context.Context, t timeoutSetting, start time.Time) (*exchange.Client, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, status.ErrClosed
	case alive(c.cur.Load()):
		c.mu.Unlock()
		return c.cur.Load(), nil
	case c.down != nil:
		err := c.down
		c.mu.Unlock()
		return nil, err
	case c.dialing != nil:
		// The first dial is under way, or over: wait for it below.
	case c.dialled:
		// The connection died and the watcher has not marked it yet.
		c.mu.Unlock()
		return nil, c.lost()
	default:
		// The first dial belongs to the connection, not to this caller:
		// a caller that gives up (its context ends) neither cancels it
		// nor marks the connection down for everyone.
		c.dialled = true
		c.dialing = make(chan struct{})
		c.wg.Go(c.firstDial)
	}
	dialing := c.dialing
	c.mu.Unlock()
	var expired <-chan time.Time
	if t.d > 0 {
		timer := time.NewTimer(t.d - time.Since(start))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-dialing:
		// The dial may end before this caller reaches the select, and
		// select then picks at random among the ready cases: a caller
		// whose context has ended is not sent either way.
		if err := ctx.Err(); err != nil {
			return nil, &connectWaitError{addr: c.addr, waited: time.Since(start),
				dialTimeout: c.p.opts.DialTimeout, cause: err}
		}
	case <-ctx.Done():
		return nil, &connectWaitError{addr: c.addr, waited: time.Since(start),
			dialTimeout: c.p.opts.DialTimeout, cause: ctx.Err()}
	case <-expired:
		return nil, &connectWaitError{addr: c.addr, waited: time.Since(start),
			dialTimeout: c.p.opts.DialTimeout, cause: context.DeadlineExceeded, timeout: &t}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch cl := c.cur.Load(); {
	case c.closed:
		return nil, status.ErrClosed
	case alive(cl):
		if waited := time.Since(start); t.d > 0 && waited >= t.d {
			// Connected, but with none of the call's time left.
			return nil, &connectWaitError{addr: c.addr, waited: waited,
				dialTimeout: c.p.opts.DialTimeout, cause: context.DeadlineExceeded, timeout: &t}
		}
		return cl, nil
	case c.down != nil:
		return nil, c.down
	}
	return nil, c.lost()
}

// connectWaitError is the error of a call whose context ended, or whose
// own timeout ran out, while it waited for the first dial to a provider:
// the request was not sent, and the dial goes on for the calls after it.
// It matches status.ErrClosed (the "not sent" class, which
// protocol.Retryable and the cluster's failover read) and the context's
// error (context.DeadlineExceeded or context.Canceled;
// context.DeadlineExceeded for a timeout), and says which address, how
// long the call waited, which setting ended the wait and how long the dial
// may take.
type connectWaitError struct {
	addr        string
	waited      time.Duration
	dialTimeout time.Duration
	cause       error           // ctx.Err(), or context.DeadlineExceeded for a timeout
	timeout     *timeoutSetting // the call's timeout, when that ended the wait
}

func (e *connectWaitError) Error() string {
	what := "the call's deadline passed"
	switch {
	case e.timeout != nil:
		what = fmt.Sprintf("the call's timeout (%s, %s) ran out", e.timeout.d, e.timeout.src)
	case !errors.Is(e.cause, context.DeadlineExceeded):
		what = "the call was cancelled"
	}
	return fmt.Sprintf("dubbo: %s while connecting to %s (waited %s for the dial); the request was not sent "+
		"(the dial goes on, for up to the dial timeout %s: check that the provider is reachable, "+
		"or give the call more time): %v",
		what, e.addr, e.waited.Round(time.Millisecond), e.dialTimeout, e.cause)
}

func (e *connectWaitError) Unwrap() []error { return []error{status.ErrClosed, e.cause} }

// lost is the error of a call that finds the connection dead before the
// watcher marked it down: with the reason it died when it is known (a
// provider refusing this consumer's certificate, say).
func (c *lazyConn) lost() error {
	if cl := c.cur.Load(); cl != nil && cl.Err() != nil {
		return fmt.Errorf("%w: connection to %s lost (%w), reconnecting", status.ErrClosed, c.addr, cl.Err())
	}
	return fmt.Errorf("%w: connection to %s lost, reconnecting", status.ErrClosed, c.addr)
}

// firstDial makes the first connection, bounded by DialTimeout and by
// Close only.
func (c *lazyConn) firstDial() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	cl, err := c.dial(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(c.dialing)
	switch {
	case c.closed:
		if cl != nil {
			cl.Close()
		}
	case err != nil:
		c.setDown(err)
		c.wg.Go(func() { c.reconnect(nil) })
	default:
		c.use(cl)
	}
}

func (c *lazyConn) dial(ctx context.Context) (*exchange.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, c.p.opts.DialTimeout)
	defer cancel()
	cl, err := exchange.Dial(dctx, c.addr, &exchange.Options{
		MaxPayload:   c.p.opts.MaxPayload,
		Heartbeat:    c.p.opts.Heartbeat,
		TLS:          c.tls,
		FrameTimeout: c.p.opts.FrameTimeout,
		MaxQueue:     c.p.opts.MaxQueue,
		ReplyBudget:  c.p.replies,
		Logger:       c.p.opts.Logger.Named("dubbo.client"),
	})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// Say whose deadline: the dial's own, not any call's.
		err = fmt.Errorf("%w (not connected within the dial timeout %v, dubbo.Options.DialTimeout)", err, c.p.opts.DialTimeout)
	}
	return cl, err
}

// use installs cl (under c.mu) and watches it.
func (c *lazyConn) use(cl *exchange.Client) {
	c.cur.Store(cl)
	c.setDown(nil)
	c.wg.Go(func() {
		select {
		case <-cl.Done():
		case <-c.stop:
			return
		}
		c.reconnect(cl)
	})
}

// reconnect re-dials until it succeeds or the connection is closed.
func (c *lazyConn) reconnect(old *exchange.Client) {
	if old != nil {
		old.Close()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.setDown(fmt.Errorf("%w: connection to %s lost (%w), reconnecting", status.ErrClosed, c.addr, old.Err()))
		c.mu.Unlock()
		if old.ReadOnly() {
			// The provider announced its shutdown before the connection
			// closed: a graceful leave, not a death.
			c.p.opts.Logger.Info("provider left gracefully (it announced its shutdown)", zap.String("addr", c.addr))
		} else {
			c.p.opts.Logger.Warn("connection to provider lost; reconnecting", zap.String("addr", c.addr), zap.Error(old.Err()))
		}
	}
	wait := c.p.opts.Reconnect
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		cl, err := c.dial(ctx)
		cancel()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			if cl != nil {
				cl.Close()
			}
			return
		}
		if err == nil {
			c.use(cl)
			c.mu.Unlock()
			c.p.opts.Logger.Info("reconnected", zap.String("addr", c.addr))
			return
		}
		c.setDown(err)
		c.mu.Unlock()
		wait = min(2*wait, c.p.opts.MaxReconnect)
		t.Reset(wait)
	}
}

// setDown records why no connection is up (nil: one is). c.mu is held.
func (c *lazyConn) setDown(err error) {
	c.down = err
	c.unusable.Store(err != nil || c.closed)
}

// available reports whether a call may be sent: the connection is up and
// the provider did not announce shutdown, or no connection was needed yet,
// or the first dial is under way (calls wait for it). It never blocks.
func (c *lazyConn) available() bool {
	cl := c.cur.Load()
	switch {
	case cl == nil: // never connected: before or during the first dial, or it failed
		return !c.unusable.Load()
	case alive(cl):
		return !cl.ReadOnly()
	}
	return false // the connection died; a re-dial installs a new one
}

func (c *lazyConn) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.unusable.Store(true)
		close(c.stop)
	}
	c.mu.Unlock()
	if cl := c.cur.Load(); cl != nil {
		cl.Close()
	}
	c.wg.Wait()
}

// invoker is a referred provider.
type invoker struct {
	p        *Protocol
	url      *protocol.URL
	ser      serialize.Serializer
	timeout  timeoutSetting
	timeouts map[string]timeoutSetting // per method, from "{method}.timeout"
	// appAtts holds only the remote.application attachment (from the URL
	// parameter of that name), sent with calls that have no attachments of
	// their own; nobody writes to it.
	appAtts map[string]string
	pool    *pool
	closed  atomic.Bool
}

var (
	_ protocol.Invoker   = (*invoker)(nil)
	_ protocol.Available = (*invoker)(nil)
)

func (p *Protocol) refer(u *protocol.URL, cfg *tls.Config) (*invoker, error) {
	if u == nil {
		return nil, fmt.Errorf("dubbo: refer: nil URL")
	}
	if u.Host == "" || u.Port <= 0 {
		return nil, fmt.Errorf("dubbo: refer %s: URL has no host:port", u)
	}
	ser, err := p.opts.Serializers.Get(u.Serialization())
	if err != nil {
		return nil, fmt.Errorf("dubbo: refer %s: %w", u.ServiceKey(), err)
	}
	key := poolKey{addr: u.Address()}
	if cfg != nil {
		key.tls = cfg // shared by the invokers given this same configuration
		cfg = minTLS12(cfg)
	} else {
		cfg = p.opts.ClientTLS
	}
	switch {
	case u.Param(KeyTLS, "") == "true" && cfg == nil:
		return nil, fmt.Errorf("dubbo: refer %s at %s: %w and this consumer has no TLS configuration (Options.ClientTLS, or ReferTLS)",
			u.ServiceKey(), u.Address(), ErrTLSRequired)
	case u.Param(KeyMTLS, "") == "true" && len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil:
		return nil, fmt.Errorf("dubbo: refer %s at %s: %w and this consumer's TLS configuration has none",
			u.ServiceKey(), u.Address(), ErrClientCertRequired)
	}
	inv := &invoker{p: p, url: u, ser: ser}
	inv.timeout.d, inv.timeout.src = u.TimeoutOf("")
	inv.timeout.d = p.capTimeout(inv.timeout.d)
	if raw := u.Param(protocol.KeyTimeout, ""); raw != "" {
		if ms, err := strconv.ParseInt(raw, 10, 64); err != nil || ms <= 0 {
			p.opts.Logger.Warn("ignoring a timeout that is not a positive integer",
				zap.String("url", u.String()), zap.String("timeout", raw))
		}
	}
	if app := u.Param(protocol.KeyRemoteApplication, ""); app != "" {
		inv.appAtts = map[string]string{protocol.KeyRemoteApplication: app}
	}
	for k, v := range u.Params() {
		m, ok := strings.CutSuffix(k, "."+protocol.KeyTimeout)
		if !ok || m == "" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			p.opts.Logger.Warn("ignoring a method timeout that is not a positive integer",
				zap.String("url", u.String()), zap.String(k, v))
			continue
		}
		if inv.timeouts == nil {
			inv.timeouts = map[string]timeoutSetting{}
		}
		var t timeoutSetting
		t.d, t.src = u.TimeoutOf(m)
		t.d = p.capTimeout(t.d)
		inv.timeouts[m] = t
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("dubbo: refer %s: %w", u.ServiceKey(), status.ErrClosed)
	}
	pl := p.pools[key]
	if pl == nil {
		pl = &pool{key: key, conns: make([]*lazyConn, p.opts.Connections)}
		for i := range pl.conns {
			pl.conns[i] = newLazyConn(p, key.addr, cfg)
		}
		p.pools[key] = pl
	}
	pl.refs++
	inv.pool = pl
	return inv, nil
}

// capTimeout bounds a timeout read from a URL by Options.MaxTimeout.
func (p *Protocol) capTimeout(d time.Duration) time.Duration {
	return min(d, p.opts.MaxTimeout)
}

// URL returns the referred URL.
func (r *invoker) URL() *protocol.URL { return r.url }

// Available reports whether a call may be sent now.
func (r *invoker) Available() bool { return !r.closed.Load() && r.pool.available() }

// Close releases the invoker's share of the connections; the last invoker
// of an address closes them. It is idempotent.
func (r *invoker) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.p.release(r.pool)
	return nil
}

// timeoutSetting is a call timeout and the setting it comes from.
type timeoutSetting struct {
	d   time.Duration
	src status.Source
}

func (r *invoker) methodTimeout(method string) timeoutSetting {
	if t, ok := r.timeouts[method]; ok {
		return t
	}
	return r.timeout
}

// explain turns a timeout into a *status.TimeoutError that names the call,
// the provider, how long it had and which setting gave it that long,
// whichever side fired: the consumer's timer (already a TimeoutError from
// exchange) or the provider's context (a timeout status). Other errors
// pass unchanged.
func (r *invoker) explain(err error, inv *protocol.Invocation, t timeoutSetting, sent time.Duration, fromCtx bool) error {
	var te *status.TimeoutError
	if errors.As(err, &te) {
		te.Service, te.Method, te.Addr = r.url.Path, inv.Method, r.url.Address()
		if te.Source == status.SourceUnknown {
			// The call's own timeout, which ran from before any wait
			// for the connection: say all of it, not what the wait left.
			te.Source, te.Timeout = t.src, t.d
		}
		return err
	}
	var se *status.Error
	if errors.As(err, &se) && (se.Code == status.ServerTimeout || se.Code == status.ClientTimeout) {
		// The setting's whole timeout, which the wait for the connection
		// (if any) shortened: the provider was given sent, what was left.
		src, d := t.src, t.d
		if fromCtx {
			src, d = status.SourceContext, sent
		}
		return &status.TimeoutError{Service: r.url.Path, Method: inv.Method, Addr: r.url.Address(),
			Timeout: d, Source: src, Side: status.Provider}
	}
	return err
}

// Invoke sends inv to the provider and waits for the answer. Its own
// frame, which every waiting call keeps on its stack, holds only what the
// wait and the answer need: encoding the request (prepare) and decoding
// the answer (answer) run in frames of their own.
func (r *invoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	if r.closed.Load() {
		return nil, status.ErrClosed
	}
	lc := r.pool.pick()
	lc.inflight.Add(1)
	defer lc.inflight.Add(-1)
	var rq outgoing
	rq.t = r.methodTimeout(inv.Method)
	cl, waited, err := lc.get(ctx, rq.t)
	if err != nil {
		return nil, err
	}
	if err := r.prepare(ctx, inv, &rq, waited); err != nil {
		return nil, err
	}
	resp, err := cl.CallAt(ctx, rq.now, rq.left, r.ser.ID(), rq.f)
	if err != nil {
		return nil, r.explain(err, inv, rq.t, rq.sent, rq.fromCtx)
	}
	return r.answer(resp, inv, rq.reqBytes)
}

// outgoing is one call's encoded request and its timeout.
type outgoing struct {
	f        *transport.Buffer
	now      time.Time // the clock read for the deadline, or zero
	t        timeoutSetting
	left     time.Duration // what the wait for the connection left of t.d
	sent     time.Duration // the timeout written into the request
	fromCtx  bool          // sent is what the context's deadline left
	reqBytes int
}

// prepare encodes inv into rq.f, with the call's timeout: the sooner of
// the context's deadline and what is left of rq.t, the URL's timeout for
// the method, after the call waited for its connection.
//
//go:noinline
func (r *invoker) prepare(ctx context.Context, inv *protocol.Invocation, rq *outgoing, waited time.Duration) error {
	rq.left = rq.t.d
	if waited > 0 && rq.t.d > 0 {
		rq.left = max(rq.t.d-waited, time.Millisecond) // get ended the call when none was left
	}
	rq.sent = rq.left
	if dl, ok := ctx.Deadline(); ok {
		rq.now = exchange.Now() // read once, for the wire's timeout and the call's
		if left := dl.Sub(rq.now); left < rq.sent {
			rq.sent, rq.fromCtx = max(left, 0), true
		}
	}
	millis := max(rq.sent.Milliseconds(), 1)
	atts := inv.Attachments // the stub put the context's there (proxy)
	atts = r.withApp(atts)
	f := exchange.NewFrame()
	enc := r.ser.NewEncoder(f)
	err := encodeRequest(enc, f, inv, r.url, millis, atts)
	enc.Release()
	if err != nil {
		f.Release()
		return err
	}
	rq.f, rq.reqBytes = f, exchange.BodyLen(f)
	return nil
}

// answer decodes the response frame resp to inv and releases it.
//
//go:noinline
func (r *invoker) answer(resp *transport.Buffer, inv *protocol.Invocation, reqBytes int) (*protocol.Result, error) {
	body := exchange.Body(resp)
	res, err := decodeResponse(r.ser, body, inv, r.p.opts.Attachments)
	if res != nil {
		res.RequestBytes, res.ResponseBytes = reqBytes, len(body)
	}
	resp.Release()
	if err != nil && errors.Is(err, status.ErrBadResponse) {
		if errors.Is(err, serialize.ErrLimit) && strings.Contains(err.Error(), "attachments:") {
			r.p.stats.badAttachments.Add(1)
		} else {
			r.p.stats.badBodies.Add(1)
		}
	}
	return res, err
}

// withApp adds the remote.application attachment to atts when the
// invoker has one to send and atts does not set it: without copying when
// atts is empty.
func (r *invoker) withApp(atts map[string]string) map[string]string {
	if r.appAtts == nil {
		return atts
	}
	if len(atts) == 0 {
		return r.appAtts
	}
	if _, ok := atts[protocol.KeyRemoteApplication]; ok {
		return atts
	}
	m := make(map[string]string, len(atts)+1)
	for k, v := range atts {
		m[k] = v
	}
	m[protocol.KeyRemoteApplication] = r.appAtts[protocol.KeyRemoteApplication]
	return m
}
