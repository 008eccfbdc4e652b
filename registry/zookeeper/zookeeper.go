// Package zookeeper is a registry.Registry on Apache ZooKeeper, with
// Dubbo's node layout so Dubbo tooling can read it:
//
//	/dubbo/{interface}/providers/{query-escaped provider URL}   ephemeral
//	/dubbo/{interface}/consumers/{query-escaped consumer URL}   ephemeral
//	/dubbo/{interface}/routers/...                              read by subscribers
//
// The category nodes are persistent. Sessions are handled as follows:
//
//   - A disconnect keeps every provider list as it is; the client reconnects
//     and every subscription re-lists its providers once a session is back.
//   - When a session expires, the client gets a new one; the registry then
//     re-creates the ephemeral nodes of this process (replacing a node only
//     when it is owned by another session) and re-lists and re-watches
//     every subscription.
//   - When ZooKeeper lost its data and refuses the old session forever, a
//     watchdog drops the connection and dials afresh.
//   - Failed operations are retried in the background with backoff, and
//     registrations are re-asserted every Options.Resync.
//   - Every provider list received is kept in a registry.Cache (memory and
//     file). Subscribe never blocks on ZooKeeper: when no session is up it
//     serves the cached list and keeps trying.
//   - An empty list replaces a non-empty one only when a healthy session
//     reports it, and not within Options.EmptyGrace of a new session (after
//     a reconnect or an expiry, of the moment the providers cut off with
//     this client can have re-registered, about 2 s later).
//
// Child names that do not parse as provider URLs are skipped with a
// warning and counted (Stats.Malformed); the rest are still delivered.
package zookeeper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("zookeeper registry: closed")

// watchdogTick is how often the watchdog looks at the session state.
const watchdogTick = 250 * time.Millisecond

// Registry is a registry.Registry on ZooKeeper. Safe for concurrent use.
type Registry struct {
	opts    Options
	servers []string
	address string
	acl     []zk.ACL
	// closedACL: acl denies strangers write, so existing nodes with an
	// open ACL are reported (see ExposedNode).
	closedACL bool
	log       *zap.Logger
	cache     *registry.Cache

	kick   chan struct{} // wakes the registration loop
	quit   chan struct{}
	loopWG sync.WaitGroup
	subWG  sync.WaitGroup
	// socks are the current zk.Conn's sockets (under mu): each Conn has
	// its own, so that the watchdog can close a replaced Conn's sockets,
	// and refuse it new ones, before it closes the Conn (see watchdog).
	socks *sockets

	mu         sync.Mutex
	closed     bool
	conn       *zk.Conn
	gen        uint64 // increments with every new zk.Conn
	authedGen  uint64 // gen whose conn has sent the credentials
	hasSession bool
	sessionID  int64
	lostAt     time.Time // when the session was last lost (or start)
	answeredAt time.Time // first TCP connect since lostAt (zero: none)
	refusedRun int       // dial attempts in a row that did not connect
	// cacheWarned: a subscription was served from the cache since the
	// session was last up (the warning is said once per outage).
	cacheWarned bool
	// handshakeEOFs counts session handshakes closed by a server in a row
	// (see watchdog); probedAt is when the servers were last asked.
	handshakeEOFs int
	probedAt      time.Time
	servingAt     time.Time // when a server was seen serving (zero: not yet)
	eofsAtServing int       // handshakeEOFs then
	upAt          time.Time // when the session was last (re)established
	regained      bool      // upAt ended a loss, not the first session (peerRecovery)
	// settled: the session's own requests may go (see settleFallback). seenSetW
	// counts SetWatches packets written; settleMark is its value when the
	// session came up. watches are the watch channels go-zookeeper may still
	// hold (with the zk.Conn that returned each); the calls in flight that
	// may leave one are counted in the zk.Conn's sockets (watchBegin).
	settled    bool
	seenSetW   uint64
	settleMark uint64
	settleGen  uint64
	watches    map[<-chan zk.Event]*zk.Conn
	pruneAt    int         // len(watches) at which fired ones are forgotten
	settle     *time.Timer // settleLate's fallback
	regs       map[string]*reg
	deletes    map[string]*pendingDelete
	subs       map[*sub]struct{}
	aclSeen    map[string]bool // nodes whose ACL was looked at: open or not
	exposed    []ExposedNode
	listing    map[*sub]int // listings in flight: their children count

	oversized      atomic.Uint64
	oversizedResp  atomic.Uint64
	refusedRedials atomic.Uint64

	// settleFallbacks counts sessions settled by settleFallback although
	// the registry counted a watch held (the counts were wrong: a
	// warning); settleZeroed those settled with no watch held, whose
	// answers then carry no zxid for a while (see handshakeConn.read).
	settleFallbacks atomic.Uint64
	settleZeroed    atomic.Uint64

	// sentinelPath is a node nobody creates, on which the registration
	// loop keeps an existence watch (see armSentinel); sentinelCh is that
	// watch's channel and sentinelConn the zk.Conn holding it (nil: none
	// armed). Only the loop's goroutine writes the last two, under mu; it
	// alone reads them without mu.
	sentinelPath string
	sentinelCh   <-chan zk.Event
	sentinelConn *zk.Conn

	exposedN  atomic.Uint64
	malformed atomic.Uint64
	redials   atomic.Uint64
	sessions  atomic.Uint64
}

var _ registry.Registry = (*Registry)(nil)

// When a session is established or re-established, go-zookeeper (v1.0.4)
// re-sends the watches it holds (a SetWatches request), reading the
// connection's last zxid for it without a lock, while its receive loop
// writes that zxid for every answered request (go-zookeeper/zk#35,
// unmerged). A request of the registry's answered around then is a data
// race inside the library, which the race detector reports in the tests
// of any program using the registry. Waiting a fixed time (100 ms until
// session 22) did not order the two: on a loaded machine the library's
// goroutine was off the CPU for longer, and the detector reported it.
//
// So the registry holds its own requests until the session has settled:
// at once when go-zookeeper holds no watch (it then reads nothing), else
// once the SetWatches packet is written on the connection (handshakeConn
// sees it; it is queued only after the read, so the registry's requests
// that follow are ordered after it). The registry knows which watches the
// library holds: every channel a ChildrenW or ExistsW returned, until it
// fires (its subscription receives from it, or it holds an event), and
// the calls in flight whose answers added one, which the connections
// count (see trySettleLocked). The registry always keeps one watch, on a
// node nobody creates (see armSentinel), so that the packet always comes
// when a session is re-established. When no watch is held (a new session:
// go-zookeeper drops them all when one expires), the session settles at
// once, but for settleFallback after it came up the answers handed to
// go-zookeeper carry no zxid, so that its receive loop writes none while
// sendSetWatches may still be reading it (see handshakeConn.read).
// settleFallback also lets the requests go should the packet not come
// although the counts said a watch was held (logged as a warning).
//
// A request go-zookeeper queued before a disconnect is no request the
// registry can hold: the library writes it first on the new connection.
// So each connection also holds back, on its read side, the answers to
// requests until the session settled (see handshakeConn.Read); holding
// the write instead would stall the send loop, and the SetWatches packet
// queued behind it.
const settleFallback = 2 * time.Second

// testSettleFallback, when positive (tests), replaces settleFallback.
var testSettleFallback atomic.Int64

// settleFallbackFor is settleFallback, or the tests' replacement.
func settleFallbackFor() time.Duration {
	if d := testSettleFallback.Load(); d > 0 {
		return time.Duration(d)
	}
	return settleFallback
}

// SetWatches opcodes (ZooKeeper 3.4's and 3.6's), and the ones that are
// no request of the registry's: ping and credentials.
const (
	opSetWatches  = 101
	opSetWatches2 = 105
	opPing        = 11
	opSetAuth     = 100
	// The registry's watch requests (ChildrenW, ExistsW) and the error
	// code of "no node".
	opGetChildren2 = 12
	opExists       = 3
	errNoNode      = -101
)

// reg is a node this process keeps registered.
type reg struct {
	url  *protocol.URL
	path string
	// tried is closed after the first attempt to create the node.
	tried     chan struct{}
	triedOnce sync.Once
	err       error // result of the first attempt, valid after tried
	// okSession is the session the node was last confirmed for; only the
	// loop goroutine touches it.
	okSession int64
}

// pendingDelete is a node to delete; done is closed once it is gone.
type pendingDelete struct {
	done chan struct{}
}

// Stats are counters for tests and monitoring.
type Stats struct {
	// Sessions counts sessions established (new session ids).
	Sessions uint64
	// Redials counts connections the watchdog dropped and dialled afresh;
	// RefusedRedials those of them made at once because a serving
	// ZooKeeper refused the session (see Options.WatchdogTimeout).
	Redials, RefusedRedials uint64
	// Malformed counts child names skipped because they did not parse
	// (each name once per subscription).
	Malformed uint64
	// Oversized counts nodes found too big to list (more than
	// Options.MaxChildren children, or a listing over
	// Options.MaxBufferSize) and skipped: once per node each time it
	// becomes too big.
	Oversized uint64
	// OversizedResponses counts responses go-zookeeper dropped the
	// connection over because they were larger than Options.MaxBufferSize
	// (at most one per node over the bound; see Oversized).
	OversizedResponses uint64
	// Exposed counts existing nodes found with an ACL that lets anyone
	// change them (see Registry.Exposed).
	Exposed uint64
	// HasSession reports whether a session is up now; SessionID is its id.
	HasSession bool
	SessionID  int64
}

// New returns a registry for address (see ParseAddress) and starts
// connecting in the background; it does not wait for ZooKeeper, so it
// succeeds while ZooKeeper is down.
func New(address string, opts Options) (*Registry, error) {
	a, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	if opts.Username == "" && a.Username != "" {
		opts.Username, opts.Password = a.Username, a.Password
	}
	if opts.Username == "" && a.Params.Get("username") != "" {
		opts.Username, opts.Password = a.Params.Get("username"), a.Params.Get("password")
	}
	if err := opts.fill(a.Params); err != nil {
		return nil, err
	}
	r := &Registry{
		opts:    opts,
		servers: a.Servers,
		address: strings.Join(a.Servers, ","),
		log:     opts.Logger.Named("zookeeper"),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		regs:    map[string]*reg{},
		deletes: map[string]*pendingDelete{},
		subs:    map[*sub]struct{}{},
		aclSeen: map[string]bool{},
		listing: map[*sub]int{},
		watches: map[<-chan zk.Event]*zk.Conn{},
	}
	r.sentinelPath = fmt.Sprintf("/%s/minidubbo-reconnect-%016x", opts.Root, rand.Uint64())
	r.acl = defaultACL(opts)
	r.closedACL = !strangerMay(r.acl)
	cachePath := opts.CacheFile
	if opts.NoCacheFile {
		cachePath = ""
	} else if cachePath == "" {
		cachePath = registry.DefaultCachePath(opts.Application, r.address)
	}
	r.cache = registry.OpenCache(cachePath, r.log)
	r.mu.Lock()
	r.lostAt = time.Now()
	r.dialLocked()
	r.mu.Unlock()
	r.loopWG.Go(r.loop)
	return r, nil
}

// Cache returns the provider cache.
func (r *Registry) Cache() *registry.Cache { return r.cache }

// Stats returns the current counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	has, sid := r.hasSession, r.sessionID
	r.mu.Unlock()
	return Stats{
		Sessions: r.sessions.Load(), Redials: r.redials.Load(), RefusedRedials: r.refusedRedials.Load(),
		Malformed: r.malformed.Load(), Oversized: r.oversized.Load(),
		OversizedResponses: r.oversizedResp.Load(), Exposed: r.exposedN.Load(),
		HasSession: has, SessionID: sid,
	}
}

// zkLogger sends go-zookeeper's log lines to zap at debug level, and to
// the registry (when r is set), which looks for an oversized response;
// gen is the registry's generation of the zk.Conn that logs.
type zkLogger struct {
	l   *zap.Logger
	r   *Registry
	gen uint64
}

// Printf implements zk.Logger.
func (z zkLogger) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	z.l.Debug(line)
	if z.r != nil {
		z.r.onZKLog(z.gen, line)
	}
}

// handshakeDialer dials like go-zookeeper's default dialer and bounds the
// wait for the answer to a session handshake by limit (see handshakeConn).
// The connections are kept in socks (nil: not kept); onSetWatches (may be
// nil) is called when a SetWatches packet is written on one.
func handshakeDialer(limit time.Duration, socks *sockets, onSetWatches func()) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		if h := testHookDial.Load(); h != nil {
			(*h)()
		}
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		hc := &handshakeConn{Conn: c, limit: limit, socks: socks, onSetWatches: onSetWatches}
		if socks != nil {
			hc.gate, hc.closing = make(chan struct{}), make(chan struct{})
		}
		if !socks.add(hc) {
			c.Close()
			return nil, ErrClosed
		}
		return hc, nil
	}
}

// sockets are the open connections to ZooKeeper. zk.Conn.Close (v1.0.4)
// does not close its socket: its goroutines wait for the server to answer
// the close request, up to a receive timeout (two thirds of the session
// timeout) when the server stopped answering. Registry.Close closes them
// so that they end at once.
type sockets struct {
	mu     sync.Mutex
	closed bool
	open   map[*handshakeConn]struct{}
	// calls are the registry's watch calls in flight on this zk.Conn, by
	// request (see watchKey), counted by what became of their requests.
	calls map[watchKey]*watchTally
}

// watchKey names a watch request: its opcode (opGetChildren2 or opExists)
// and path. The registry's calls are told apart by it only: calls on the
// same key are counted together.
type watchKey struct {
	op   int32
	path string
}

// watchTally counts the calls in flight on one watchKey by what became of
// their requests: not written yet (queued in go-zookeeper, or about to
// be), written and not answered on a connection still open, answered in a
// way that adds a watch in go-zookeeper (see answerAddsWatch), or done
// without adding one (answered otherwise, or their connection closed
// before an answer was read: go-zookeeper fails them).
type watchTally struct {
	unsent, live, added, none int
}

// watchBegin counts a call on k about to be made.
func (s *sockets) watchBegin(k watchKey) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[watchKey]*watchTally{}
	}
	w := s.calls[k]
	if w == nil {
		w = &watchTally{}
		s.calls[k] = w
	}
	w.unsent++
}

// watchEnd forgets a call on k that returned, with a watch channel or
// not. Calls on one key are not told apart, so the one forgotten is
// counted in the state its return proves some call on k is in (a channel:
// added), else in the first of the states that add no watch; so the
// states left never count fewer calls that may add a watch than there are.
func (s *sockets) watchEnd(k watchKey, watched bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.calls[k]
	if w == nil {
		return
	}
	order := []*int{&w.none, &w.unsent, &w.live, &w.added}
	if watched {
		order = []*int{&w.added, &w.live, &w.unsent, &w.none}
	}
	for _, n := range order {
		if *n > 0 {
			*n--
			break
		}
	}
	if *w == (watchTally{}) {
		delete(s.calls, k)
	}
}

// watchState returns how many calls in flight were answered in a way that
// adds a watch (go-zookeeper holds it, the caller has not got its
// channel yet), and how many have a request not written yet or not
// answered yet on an open connection (it may still add one).
func (s *sockets) watchState() (added, pending int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.calls {
		added += w.added
		pending += w.unsent + w.live
	}
	return added, pending
}

// add keeps c; false when the registry is closed.
func (s *sockets) add(c *handshakeConn) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.open == nil {
		s.open = map[*handshakeConn]struct{}{}
	}
	s.open[c] = struct{}{}
	return true
}

func (s *sockets) remove(c *handshakeConn) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

// close closes every open connection and refuses new ones. A nil s has
// none.
func (s *sockets) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for c := range open {
		c.shut()
		_ = c.Conn.Close()
	}
}

// release lets the answers through on every open connection (see
// handshakeConn.Read): the session settled. For zero from now (if
// positive) their zxid is cleared.
func (s *sockets) release(zero time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.open {
		c.release(zero)
	}
}

// handshakeConn cuts the read deadline of a session handshake to limit.
// go-zookeeper (v1.0.4) waits ten receive timeouts for the server's answer
// (20 s with a 3 s session, 400 s with a 60 s one), and a server that
// accepted the connection while it was starting may never answer nor
// close it (seen under load right after a restart): the registry then
// learned nothing, no session and no refusal, for that long. The limit is
// the receive timeout go-zookeeper allows every later read (two thirds of
// the session timeout), as ZooKeeper's Java client bounds its handshake
// too. The first deadline set on a connection is the handshake's; it ends
// when go-zookeeper clears it, and later deadlines are left alone.
type handshakeConn struct {
	net.Conn
	limit time.Duration
	done  atomic.Bool
	socks *sockets
	// onSetWatches is called before a SetWatches packet is written;
	// firstOp is the opcode of the first request written after the
	// handshake other than a ping or credentials (0: none yet).
	onSetWatches func()
	firstOp      atomic.Int32

	// The read gate (nil gate: none; see Read). gate is closed when the
	// session settled (release), closing when the connection is closed
	// (shut); open tells that gate is closed. auths are the xids of the
	// credentials packets written whose answers have not come.
	gate    chan struct{}
	closing chan struct{}
	open    atomic.Bool
	// zeroTill is when (on zeroClock) answers stop having their zxid
	// cleared (0: they are not; see release); zeroed counts those
	// cleared. watchAdded (the reading goroutine's): an answer that adds
	// a watch was handed over.
	zeroTill   atomic.Int64
	zeroed     atomic.Uint64
	watchAdded bool
	gateOnce   sync.Once
	closeOnce  sync.Once
	authMu     sync.Mutex
	auths      []int32
	// watchReqs are the registry's watch requests written on this
	// connection and not answered yet, by xid (under socks.mu); nWatchReqs
	// is their number.
	watchReqs  map[int32]watchKey
	nWatchReqs atomic.Int32
	readEnded  bool // a Read failed: no answer is read any more (under socks.mu)
	// The reading goroutine's own: frames counts the frames begun (the
	// first is the handshake's answer), left the bytes of the current
	// frame still to pass unparsed, pend bytes read but not handed over
	// yet (a slice of hdr).
	frames int
	left   int
	pend   []byte
	hdr    [20]byte
}

// Read implements net.Conn. go-zookeeper (v1.0.4) re-sends its watches
// (reading its last zxid unguarded) while its receive loop already reads
// answers, and writes that zxid for every answer to a request (see
// settleFallback). The registry's own requests wait for the session to
// settle, but a request go-zookeeper queued before a disconnect is written
// at once on the new connection. So, until the session settled (the
// SetWatches packet is written, which go-zookeeper queues only after it
// read the zxid, or the registry knows no watch is held: then the
// answers carry no zxid for a while, see release), an answer to a
// request other than credentials (whose answers resendZkAuth waits for
// before the send loop runs) is held back, and the bytes after it with
// it: the stream is ordered. Pings and watch events ahead of it pass.
// Released or not, each frame's reply header is read ahead (a frame takes
// up to two socket reads more, no allocation), so that the answers to the
// registry's watch requests are counted (see trySettleLocked).
func (c *handshakeConn) Read(p []byte) (int, error) {
	if c.gate == nil {
		return c.Conn.Read(p)
	}
	n, err := c.read(p)
	if n == 0 && err != nil && c.socks != nil {
		// The receive loop ends: the watch requests not answered yet
		// never will be, and add no watch.
		c.lostWatchRequests()
	}
	return n, err
}

// read is Read on a gated connection.
func (c *handshakeConn) read(p []byte) (int, error) {
	if len(c.pend) > 0 {
		n := copy(p, c.pend)
		c.pend = c.pend[n:]
		return n, nil
	}
	if c.left > 0 {
		if len(p) > c.left {
			p = p[:c.left]
		}
		n, err := c.Conn.Read(p)
		c.left -= n
		return n, err
	}
	// A frame begins: its length, then (for answers) the reply header
	// xid int32, zxid int64, err int32. Errors end the connection (the
	// receive loop closes it), so bytes read before one are not kept.
	if _, err := io.ReadFull(c.Conn, c.hdr[:4]); err != nil {
		return 0, err
	}
	c.frames++
	u := binary.BigEndian.Uint32(c.hdr[:4])
	if u > math.MaxInt32 {
		// ZooKeeper's lengths are Java ints: this one is negative.
		// go-zookeeper would take it as a negative int on a 32-bit
		// platform and panic slicing its buffer with it.
		return 0, fmt.Errorf("zookeeper: %v sent a frame length of %#x, over 2 GiB", c.RemoteAddr(), u)
	}
	blen := int(u)
	if c.frames == 1 || blen < 16 {
		// The handshake's answer, or no reply header: go-zookeeper
		// judges it (and checks the length against its buffer).
		c.pend, c.left = c.hdr[:4], blen
		return c.read(p)
	}
	if _, err := io.ReadFull(c.Conn, c.hdr[4:20]); err != nil {
		return 0, err
	}
	c.pend, c.left = c.hdr[:20], blen-16
	xid := int32(binary.BigEndian.Uint32(c.hdr[4:8]))
	if xid >= 0 && !c.open.Load() && !c.authAnswer(xid) {
		if h := testHookGateHeld.Load(); h != nil {
			(*h)(c)
		}
		select {
		case <-c.gate:
		case <-c.closing:
			return 0, net.ErrClosed
		}
	}
	if xid >= 0 {
		if z := c.zeroTill.Load(); z != 0 && c.watchAdded {
			if zeroClock() < z {
				clear(c.hdr[8:16])
				c.zeroed.Add(1)
			} else {
				c.zeroTill.CompareAndSwap(z, 0)
			}
		}
		if c.nWatchReqs.Load() > 0 && c.sawAnswer(xid, int32(binary.BigEndian.Uint32(c.hdr[16:20]))) {
			c.watchAdded = true
		}
	}
	return c.read(p)
}

// zeroEpoch and zeroClock: a monotonic clock in nanoseconds.
var zeroEpoch = time.Now()

func zeroClock() int64 { return int64(time.Since(zeroEpoch)) }

// answerAddsWatch reports whether go-zookeeper (v1.0.4) adds a watch when
// it reads an answer with error code code to a watch request with opcode
// op: ChildrenW on success, ExistsW on success or "no node" (its receive
// loop adds the watch before it hands the answer to the caller, unless
// the answer does not decode).
func answerAddsWatch(op, code int32) bool {
	return code == 0 || (op == opExists && code == errNoNode)
}

// sawWatchRequest records a registry watch request written on c.
func (c *handshakeConn) sawWatchRequest(xid int32, k watchKey) {
	s := c.socks
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.calls[k]
	if w == nil || w.unsent == 0 {
		return // no call of the registry's (tests)
	}
	w.unsent--
	if c.readEnded {
		// Written after the receive loop ended (go-zookeeper's send
		// loop had not seen it yet): never answered, go-zookeeper fails it.
		w.none++
		return
	}
	w.live++
	if c.watchReqs == nil {
		c.watchReqs = map[int32]watchKey{}
	}
	c.watchReqs[xid] = k
	c.nWatchReqs.Add(1)
}

// sawAnswer records the answer to request xid, handed to go-zookeeper now
// with error code code, if it is a watch request's.
// It reports whether the answer adds a watch in go-zookeeper.
func (c *handshakeConn) sawAnswer(xid, code int32) bool {
	s := c.socks
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := c.watchReqs[xid]
	if !ok {
		return false
	}
	delete(c.watchReqs, xid)
	c.nWatchReqs.Add(-1)
	adds := answerAddsWatch(k.op, code)
	if w := s.calls[k]; w != nil && w.live > 0 {
		w.live--
		if adds {
			w.added++
		} else {
			w.none++
		}
	}
	return adds
}

// lostWatchRequests records that the watch requests written on c will not
// be answered: the receive loop got an error reading c, and go-zookeeper
// fails them. (The reading goroutine tells, not Close: an answer whose
// header was read may still be handed over.)
func (c *handshakeConn) lostWatchRequests() {
	s := c.socks
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.readEnded = true
	for xid, k := range c.watchReqs {
		delete(c.watchReqs, xid)
		c.nWatchReqs.Add(-1)
		if w := s.calls[k]; w != nil && w.live > 0 {
			w.live--
			w.none++
		}
	}
}

// watchRequest returns the key of a ChildrenW or ExistsW request packet b
// (length, xid, opcode, path, watch flag), or false.
func watchRequest(op int32, b []byte) (watchKey, bool) {
	if len(b) < 17 || b[len(b)-1] != 1 {
		return watchKey{}, false
	}
	n := int(int32(binary.BigEndian.Uint32(b[12:16])))
	if n < 0 || n != len(b)-17 {
		return watchKey{}, false
	}
	return watchKey{op, string(b[16 : 16+n])}, true
}

// testHookDial, when set (tests), runs before go-zookeeper's dial (on its
// connecting goroutine).
var testHookDial atomic.Pointer[func()]

// testHookGateHeld, when set (tests), runs when a Read holds an answer
// back (see handshakeConn.Read).
var testHookGateHeld atomic.Pointer[func(*handshakeConn)]

// testHookSetWatches, when set (tests), runs before a SetWatches packet
// is written.
var testHookSetWatches atomic.Pointer[func(*handshakeConn)]

// testHookWatchRequest, when set (tests), runs before a registry watch
// request is written.
var testHookWatchRequest atomic.Pointer[func(*handshakeConn)]

// authAnswer reports (and forgets) whether xid is a credentials packet's.
func (c *handshakeConn) authAnswer(xid int32) bool {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	for i, a := range c.auths {
		if a == xid {
			c.auths = append(c.auths[:i], c.auths[i+1:]...)
			return true
		}
	}
	return false
}

// release opens the read gate (see Read). For zero from now (if
// positive; it is not when the SetWatches packet opens it), or until a
// SetWatches packet is written, the answers handed over after one that
// adds a watch carry no zxid. go-zookeeper (v1.0.4) writes its last zxid
// only for an answer whose zxid is above 0. sendSetWatches reads it only
// if it holds a watch, that is after the receive loop added the first one
// (its zxid written before, under the watch lock both take), and then
// always writes a SetWatches packet: so the receive loop writes no zxid
// that sendSetWatches may be reading (see trySettleLocked), provided the
// packet comes within zero when it does. The cost is a last zxid that
// lags for at most that long after the first watch: a reconnect then
// tells the server an older one (a weaker check that the server has not
// gone back in time) and re-sends watches from it (they may fire for
// changes already listed).
func (c *handshakeConn) release(zero time.Duration) {
	if c.gate == nil {
		return
	}
	c.gateOnce.Do(func() {
		if zero > 0 {
			c.zeroTill.Store(zeroClock() + int64(zero))
		}
		c.open.Store(true)
		close(c.gate)
	})
}

// shut wakes a Read held at the gate: the connection is closed.
func (c *handshakeConn) shut() {
	if c.closing == nil {
		return
	}
	c.closeOnce.Do(func() { close(c.closing) })
}

// Write implements net.Conn. go-zookeeper writes each packet with one
// Write: a length, then (after the handshake's) a request header whose
// second field is the opcode.
func (c *handshakeConn) Write(b []byte) (int, error) {
	if c.done.Load() && len(b) >= 12 {
		switch op := int32(binary.BigEndian.Uint32(b[8:12])); op {
		case opPing:
		case opSetAuth:
			if c.gate != nil && !c.open.Load() {
				c.authMu.Lock()
				c.auths = append(c.auths, int32(binary.BigEndian.Uint32(b[4:8])))
				c.authMu.Unlock()
			}
		default:
			c.firstOp.CompareAndSwap(0, op)
			if (op == opGetChildren2 || op == opExists) && c.gate != nil {
				if k, ok := watchRequest(op, b); ok {
					if h := testHookWatchRequest.Load(); h != nil {
						(*h)(c)
					}
					c.sawWatchRequest(int32(binary.BigEndian.Uint32(b[4:8])), k)
				}
			}
			if op == opSetWatches || op == opSetWatches2 {
				if h := testHookSetWatches.Load(); h != nil {
					(*h)(c)
				}
				if c.onSetWatches != nil {
					c.onSetWatches()
				}
				// go-zookeeper read its last zxid before it queued this.
				c.zeroTill.Store(0)
				c.release(0)
			}
		}
	}
	return c.Conn.Write(b)
}

// Close implements net.Conn.
func (c *handshakeConn) Close() error {
	c.socks.remove(c)
	c.shut()
	return c.Conn.Close()
}

// SetReadDeadline implements net.Conn.
func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	if !c.done.Load() {
		if t.IsZero() {
			c.done.Store(true)
		} else if lim := time.Now().Add(c.limit); t.After(lim) {
			t = lim
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// dialLocked starts a new zk.Conn. r.mu must be held, so the event
// callback (which takes r.mu) sees r.conn set.
func (r *Registry) dialLocked() {
	r.gen++
	gen := r.gen
	r.socks = &sockets{}
	conn, _, err := zk.Connect(r.servers, r.opts.SessionTimeout,
		zk.WithEventCallback(func(ev zk.Event) { r.onEvent(gen, ev) }),
		zk.WithDialer(handshakeDialer(r.opts.SessionTimeout*2/3, r.socks, r.sawSetWatches)),
		zk.WithLogger(zkLogger{r.log, r, gen}),
		zk.WithLogInfo(false),
		zk.WithMaxBufferSize(r.opts.MaxBufferSize))
	if err != nil {
		// Only an empty server list fails, and ParseAddress rules it out.
		r.log.Error("zookeeper connect", zap.Error(err))
		return
	}
	r.conn = conn
}

// onEvent is the session callback. It never blocks: it records the state
// under r.mu (never held across ZooKeeper calls) and kicks workers.
func (r *Registry) onEvent(gen uint64, ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	r.mu.Lock()
	if r.closed || gen != r.gen || r.conn == nil {
		r.mu.Unlock()
		return
	}
	now := time.Now()
	kick := false
	switch ev.State {
	case zk.StateHasSession:
		r.handshakeEOFs, r.servingAt = 0, time.Time{}
		sid := r.conn.SessionID()
		if !r.hasSession {
			kick = true
			r.cacheWarned = false // the outage, if any, is over
		}
		if !r.hasSession && sid == r.sessionID {
			r.log.Info("zookeeper reconnected; session kept", zap.String("address", r.address), zap.Int64("session", sid),
				zap.Duration("disconnected_for", now.Sub(r.lostAt).Round(time.Millisecond)))
		}
		r.hasSession = true
		if sid != r.sessionID {
			r.log.Info("zookeeper session established", zap.String("address", r.address), zap.Int64("session", sid), zap.Int64("previous", r.sessionID))
			r.sessionID = sid
			r.sessions.Add(1)
			kick = true
		}
	case zk.StateConnected:
		r.refusedRun = 0
		if !r.hasSession && r.answeredAt.IsZero() {
			r.answeredAt = now
		}
	case zk.StateConnecting:
		// Every server refusing in a row means ZooKeeper is down rather
		// than refusing our session: start the watchdog's count afresh.
		r.refusedRun++
		if r.refusedRun > len(r.servers) {
			r.answeredAt, r.servingAt = time.Time{}, time.Time{}
		}
		if r.refusedRun == len(r.servers)+1 && r.sessions.Load() == 0 {
			// No server takes a connection before the first session:
			// subscriptions waiting for it serve their cached lists now
			// (see awaitFirstSession).
			for s := range r.subs {
				poke(s.kick)
			}
		}
		r.loseSessionLocked(now)
	case zk.StateExpired:
		r.log.Warn("zookeeper session expired; a new one re-creates this process's nodes and re-lists providers",
			zap.String("address", r.address), zap.Int64("session", r.sessionID))
		r.loseSessionLocked(now)
	case zk.StateDisconnected, zk.StateAuthFailed:
		if r.hasSession {
			r.log.Info("zookeeper disconnected; keeping provider lists while reconnecting",
				zap.String("address", r.address), zap.Int64("session", r.sessionID), zap.Stringer("state", ev.State))
		}
		r.loseSessionLocked(now)
	}
	if kick {
		r.regained = !r.upAt.IsZero()
		r.upAt = now
		r.settled = false
		r.settleMark = r.seenSetW
		r.settleGen++
		if r.settle != nil {
			r.settle.Stop()
			r.settle = nil
		}
		r.trySettleLocked()
		if !r.settled {
			gen := r.settleGen
			r.settle = time.AfterFunc(settleFallbackFor(), func() { r.settleLate(gen) })
		}
	}
	r.mu.Unlock()
	if kick {
		if h := testHookSession.Load(); h != nil {
			(*h)(r)
		}
	}
}

// testHookSession, when set (tests), runs in go-zookeeper's event
// callback after a session came up: where that goroutine is, before it
// re-sends its watches.
var testHookSession atomic.Pointer[func(*Registry)]

// trySettleLocked settles the session when go-zookeeper holds no watch or
// has written its SetWatches packet since the session came up, and wakes
// everyone then (see settleFallback). r.mu is held.
//
// go-zookeeper (v1.0.4) adds a watch only when its receive loop reads an
// answer to a ChildrenW or ExistsW (see answerAddsWatch), and removes it
// when it fires; until the session settled every answer on the new
// connection is held back (handshakeConn.Read), so none is added then. It
// holds one if a channel the registry got has not fired, or if an answer
// that added one was read and its call has not returned yet: then the
// SetWatches packet comes. It holds none if neither, and no watch call in
// flight may still have its answer read: a call whose request was written
// on a connection that closed before its answer was read adds none
// (go-zookeeper fails it), whether or not its caller has run since.
//
// A call whose request is not written yet (queued while the connection
// was down: go-zookeeper writes it first on the new one) or not answered
// yet is the case no count decides: go-zookeeper decides whether to
// re-send watches on another goroutine (sendSetWatches, after the
// callback that reports the session) and gives no sign when it decided
// none. Were its answer handed over before that, it could add a watch
// that go-zookeeper then re-sends, reading its last zxid while the
// receive loop writes it (the race the gate is for); so could the answer
// to a watch call that the settle's own kick starts. The reconnect
// sentinel (armSentinel) takes that case away when a session is
// re-established: a watch is held, the packet comes. With no watch held
// (a new session: go-zookeeper dropped every watch when the old one
// expired; or the sentinel not armed) the session settles at once, and
// the answers handed over within settleFallback of the session's coming
// up carry no zxid: the receive loop writes none, whatever sendSetWatches
// does meanwhile (see handshakeConn.read).
func (r *Registry) trySettleLocked() {
	if r.settled || !r.hasSession || r.closed {
		return
	}
	var zero time.Duration
	if r.seenSetW == r.settleMark {
		r.pruneWatchesLocked()
		if len(r.watches) > 0 {
			return // settled when the SetWatches packet is written
		}
		added, _ := r.socks.watchState()
		if added > 0 {
			return // the same (or the call returns a channel that fired)
		}
		// No watch held: go-zookeeper may be about to decide that it
		// re-sends none, or (an answer handed over first adding one) to
		// read its zxid for the packet. Answers carry none meanwhile.
		zero = settleFallbackFor() - time.Since(r.upAt)
		if zero > 0 {
			r.settleZeroed.Add(1)
		}
	}
	r.settled = true
	if r.settle != nil {
		r.settle.Stop()
		r.settle = nil
	}
	r.socks.release(zero)
	r.kickAllLocked()
}

// pruneWatchesLocked forgets the watch channels that fired (they hold
// their event) or came from another connection. r.mu is held.
func (r *Registry) pruneWatchesLocked() {
	for ch, c := range r.watches {
		if len(ch) > 0 || c != r.conn {
			delete(r.watches, ch)
		}
	}
}

// settleLate settles session gen if the SetWatches packet did not come
// within settleFallback although a watch seemed to be held.
func (r *Registry) settleLate(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.settled || !r.hasSession || gen != r.settleGen {
		return
	}
	after := settleFallbackFor()
	r.pruneWatchesLocked()
	added, pending := r.socks.watchState()
	// The counts said go-zookeeper holds a watch (a session with none
	// settles at once): it would have re-sent it. Reachable only if they
	// are wrong (an answer that did not decode, say).
	r.settleFallbacks.Add(1)
	r.log.Warn("zookeeper: the registry counted watches held after the session came back, but go-zookeeper re-sent none; going on",
		zap.Duration("after", after), zap.Int("watches", len(r.watches)), zap.Int("answered_calls", added), zap.Int("requests", pending))
	r.seenSetW++ // as if it came
	r.trySettleLocked()
}

// sawSetWatches is called (by the connection's send loop) before a
// SetWatches packet is written.
func (r *Registry) sawSetWatches() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seenSetW++
	r.trySettleLocked()
}

// watchCall is called before a ChildrenW (op opGetChildren2) or ExistsW
// (opExists) of path on conn, and its returned function after it with
// the watch channel it returned (nil when none). The call is counted in
// conn's sockets (see trySettleLocked) when conn is the current one.
func (r *Registry) watchCall(conn *zk.Conn, op int32, path string) func(<-chan zk.Event) {
	k := watchKey{op, path}
	r.mu.Lock()
	socks := r.socks
	if conn != r.conn {
		socks = nil // a replaced zk.Conn: its watches are not re-sent
	}
	socks.watchBegin(k)
	r.mu.Unlock()
	return func(ch <-chan zk.Event) {
		if h := testHookWatchReturned.Load(); h != nil {
			(*h)()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		socks.watchEnd(k, ch != nil)
		if ch != nil {
			r.watches[ch] = conn
			if len(r.watches) >= r.pruneAt {
				// Channels a subscription dropped unfired (it listed
				// again) fire with the node's change; forget those.
				r.pruneWatchesLocked()
				r.pruneAt = max(2*len(r.watches), 64)
			}
		}
		r.trySettleLocked()
	}
}

// testHookWatchReturned, when set (tests), runs when a watch call
// returned, before the registry counts it.
var testHookWatchReturned atomic.Pointer[func()]

// watchFired forgets ch once its subscription has received from it. A
// fire may have removed the last watch go-zookeeper held while the
// session waits to settle: then no SetWatches packet comes, so the
// session settles now.
func (r *Registry) watchFired(ch <-chan zk.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.watches, ch)
	r.trySettleLocked()
}

// loseSessionLocked records that the session is not usable now.
func (r *Registry) loseSessionLocked(now time.Time) {
	if r.hasSession {
		r.hasSession = false
		r.lostAt = now
		r.answeredAt = time.Time{}
		r.refusedRun = 0
	}
}

// kickAllLocked wakes the registration loop and every subscription.
func (r *Registry) kickAllLocked() {
	poke(r.kick)
	for s := range r.subs {
		poke(s.kick)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// peerRecovery is how long after this client's session came back from a
// loss the providers cut off by the same partition may still be busy
// re-registering, so an empty provider list is not believed before then
// (Options.EmptyGrace counts from there). go-zookeeper (v1.0.4) pauses a
// second before each round of dials, and again after a handshake the
// server answered "session expired", before it dials for a new session;
// then a provider's registry creates its node once its session settled
// (at once, or when its SetWatches packet is written; 100 ms allowed).
// So a provider whose session expired re-registers up to about two
// seconds after the partition healed, while this client's own session
// may have come back right then. EmptyGrace alone (SessionTimeout by
// default, 2 s in config's tests) did not cover that: the consumer was
// handed an empty list while the provider's re-registration was in flight.
const peerRecovery = 2*time.Second + 100*time.Millisecond

// ready returns the connection when a session is up, settled (see
// settleFallback) and the credentials (if any) were sent on it, and the
// moment from which an empty provider list's grace counts: when the
// session was established, or, after a loss, peerRecovery after it was
// re-established.
func (r *Registry) ready() (conn *zk.Conn, sid int64, graceFrom time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok = !r.closed && r.hasSession && r.settled && r.conn != nil && (r.opts.Username == "" || r.authedGen == r.gen)
	graceFrom = r.upAt
	if r.regained {
		graceFrom = graceFrom.Add(peerRecovery)
	}
	return r.conn, r.sessionID, graceFrom, ok
}

// loop is the single writer: it creates and deletes this process's nodes,
// retries failures with backoff, re-asserts registrations every Resync, and
// runs the watchdog.
func (r *Registry) loop() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	tick := time.NewTicker(watchdogTick)
	defer tick.Stop()
	backoff := r.opts.RetryMin
	resyncNext := true // the pending timer is a resync, not a retry
	for {
		full := false
		select {
		case <-r.quit:
			return
		case <-tick.C:
			r.watchdog()
			continue
		case <-r.kick:
		case ev := <-r.sentinelCh:
			r.sentinelFired(ev)
		case <-timer.C:
			full = resyncNext
		}
		if r.reconcile(full) {
			backoff = r.opts.RetryMin
			timer.Reset(r.opts.Resync)
			resyncNext = true
		} else {
			timer.Reset(jitter(backoff))
			backoff = min(2*backoff, r.opts.RetryMax)
			resyncNext = false
		}
	}
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
}

// watchdog re-dials when servers have accepted connections for
// WatchdogTimeout without giving a session back: a server that lost its
// data refuses the old session forever and go-zookeeper never gives up on
// it. A server that is simply down (connections refused) does not trigger
// it, so the session survives outages.
//
// It does not always wait that long: when every server in turn has closed
// the session handshake (go-zookeeper logs "authentication failed: EOF",
// or a connection reset)
// and one of them says it serves clients (the srvr command shows its
// Mode), ZooKeeper is up and refusing this session because it has seen
// less than the client has: it lost its data. Then the watchdog re-dials
// at once. A member that is not serving (an election) does not say so,
// and a server with srvr not allowed leaves the plain timeout.
func (r *Registry) watchdog() {
	r.mu.Lock()
	if r.closed || r.hasSession || r.answeredAt.IsZero() {
		r.mu.Unlock()
		return
	}
	reason := "no session although servers answer; dialling afresh"
	if time.Since(r.answeredAt) < r.opts.WatchdogTimeout {
		// Refused only when a handshake was closed after a server was
		// seen serving: a server that is starting closes them too.
		refused := !r.servingAt.IsZero() && r.handshakeEOFs > r.eofsAtServing
		if !refused {
			probe := r.servingAt.IsZero() && r.handshakeEOFs > len(r.servers) && time.Since(r.probedAt) >= time.Second
			if probe {
				r.probedAt = time.Now()
			}
			r.mu.Unlock()
			if probe && r.anyServing() {
				r.mu.Lock()
				if r.servingAt.IsZero() {
					r.servingAt, r.eofsAtServing = time.Now(), r.handshakeEOFs
				}
				r.mu.Unlock()
			}
			return
		}
		reason = "ZooKeeper serves but refuses this session (it has seen less than this client: its data was lost); dialling afresh"
		r.refusedRedials.Add(1)
	}
	old, oldSocks := r.conn, r.socks
	r.log.Warn("zookeeper: "+reason,
		zap.Duration("without_session", time.Since(r.lostAt)),
		zap.Duration("answering_for", time.Since(r.answeredAt)))
	r.redials.Add(1)
	r.handshakeEOFs, r.servingAt = 0, time.Time{}
	r.lostAt = time.Now()
	r.answeredAt = time.Time{}
	r.refusedRun = 0
	r.sessionID = 0
	r.dialLocked()
	r.kickAllLocked()
	r.mu.Unlock()
	// The old Conn's sockets first: zk.Conn.Close queues a close request,
	// and an old handshake that completed after this decision would send
	// it on a live session while go-zookeeper re-sends its watches, a data
	// race inside the library on its last zxid (go-zookeeper/zk#35; seen
	// in TestUnregisterDuringOutage under -race). Closed sockets, and no
	// new ones, mean that no handshake of the old Conn completes.
	oldSocks.close()
	if old != nil {
		old.Close()
	}
}

// reconcile makes ZooKeeper hold exactly this process's registrations:
// pending deletes, and nodes not yet confirmed for the current session (all
// nodes when full, the periodic re-assertion). It returns false when
// something failed and should be retried.
func (r *Registry) reconcile(full bool) bool {
	r.mu.Lock()
	conn, gen, has := r.conn, r.gen, r.hasSession && r.settled
	needAuth := r.opts.Username != "" && r.authedGen != gen
	r.mu.Unlock()
	if !has || conn == nil {
		return false
	}
	if needAuth {
		if err := conn.AddAuth("digest", []byte(r.opts.Username+":"+r.opts.Password)); err != nil {
			r.log.Warn("zookeeper auth failed; will retry", zap.Error(err))
			return false
		}
		r.mu.Lock()
		if r.gen == gen {
			r.authedGen = gen
			r.kickAllLocked()
		}
		r.mu.Unlock()
	}
	conn, sid, _, ok := r.ready()
	if !ok {
		return false
	}
	good := true
	r.checkACLs(conn, "/"+r.opts.Root)
	r.mu.Lock()
	regs := make([]*reg, 0, len(r.regs))
	for _, g := range r.regs {
		regs = append(regs, g)
	}
	dels := make(map[string]*pendingDelete, len(r.deletes))
	for p, d := range r.deletes {
		dels[p] = d
	}
	r.mu.Unlock()

	for p, d := range dels {
		if err := r.deleteOwn(conn, p, sid); err != nil {
			r.log.Warn("zookeeper unregister failed; will retry", zap.String("node", p), zap.Error(err))
			good = false
			continue
		}
		r.mu.Lock()
		if r.deletes[p] == d {
			delete(r.deletes, p)
		}
		r.mu.Unlock()
		close(d.done)
	}
	for _, g := range regs {
		if !full && g.okSession == sid {
			continue
		}
		r.checkACLs(conn, ancestors(g.path)...)
		err := r.ensureEphemeral(conn, g.path, sid)
		if err != nil {
			r.log.Warn("zookeeper register failed; will retry", zap.String("node", g.path), zap.Error(err))
			good = false
			g.okSession = 0
		} else {
			g.okSession = sid
		}
		g.triedOnce.Do(func() { g.err = err; close(g.tried) })
	}
	// After the registrations, whose latency matters more.
	if err := r.armSentinel(conn); err != nil {
		r.log.Info("zookeeper: watch on the reconnect sentinel failed; will retry", zap.String("node", r.sentinelPath), zap.Error(err))
		good = false
	}
	return good
}

// armSentinel leaves an existence watch on sentinelPath, a node nobody
// creates, unless conn holds one already. go-zookeeper (v1.0.4) keeps its
// watches across a disconnect and re-sends them when the session comes
// back; with this one always held it always does, so a session that
// comes back settles when the SetWatches packet is written (see
// trySettleLocked), and never has to guess whether go-zookeeper decided
// to re-send none. A new session holds no watch (go-zookeeper drops them
// all when the session expires) until this runs again. Only the loop's
// goroutine calls it.
func (r *Registry) armSentinel(conn *zk.Conn) error {
	if r.sentinelCh != nil && r.sentinelConn == conn {
		return nil
	}
	done := r.watchCall(conn, opExists, r.sentinelPath)
	_, _, ch, err := conn.ExistsW(r.sentinelPath)
	done(ch)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sentinelCh, r.sentinelConn = ch, conn
	r.mu.Unlock()
	return nil
}

// sentinelFired forgets the sentinel's watch, which fired: the session
// expired or the connection closed (go-zookeeper ends every watch then),
// or someone created or changed the node. The loop arms it again once a
// session is ready.
func (r *Registry) sentinelFired(ev zk.Event) {
	r.mu.Lock()
	ch := r.sentinelCh
	r.sentinelCh, r.sentinelConn = nil, nil
	r.mu.Unlock()
	r.watchFired(ch)
	if ev.Type != zk.EventNotWatching {
		r.log.Info("zookeeper: the reconnect sentinel node changed; watching it again",
			zap.String("node", r.sentinelPath), zap.Stringer("event", ev.Type))
	}
}

// ensureEphemeral creates the ephemeral node at p for session sid. A node
// already there is kept when sid owns it and replaced otherwise (an expired
// session's node the server has not deleted yet, or a stale one).
func (r *Registry) ensureEphemeral(conn *zk.Conn, p string, sid int64) error {
	for attempt := 0; attempt < 3; attempt++ {
		_, err := conn.Create(p, nil, zk.FlagEphemeral, r.acl)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := r.ensurePath(conn, path.Dir(p)); err != nil {
				return err
			}
			continue
		case errors.Is(err, zk.ErrNodeExists):
			ok, st, err := conn.Exists(p)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if st.EphemeralOwner == sid {
				return nil
			}
			r.log.Info("zookeeper: replacing node owned by another session",
				zap.String("node", p), zap.Int64("owner", st.EphemeralOwner), zap.Int64("session", sid))
			if err := conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			continue
		default:
			return err
		}
	}
	return fmt.Errorf("zookeeper registry: node %s: gave up after 3 attempts", p)
}

// deleteOwn deletes the node at p unless another session owns it.
func (r *Registry) deleteOwn(conn *zk.Conn, p string, sid int64) error {
	ok, st, err := conn.Exists(p)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if st.EphemeralOwner != 0 && st.EphemeralOwner != sid {
		// Not ours (another process registered the same URL, or an old
		// session of ours that will expire by itself).
		return nil
	}
	if err := conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	if path.Base(path.Dir(p)) == registry.CategoryConsumers {
		r.pruneEmpty(conn, path.Dir(p))
	}
	return nil
}

// pruneEmpty deletes the consumers node dir and then its service node if
// they have no children left, so that a consumer of a service nobody
// provides (minidubbo invoke, say) leaves nothing behind for ls to show. A
// node that is not empty stays; a process creating a node under one
// deleted meanwhile re-creates the path (ensureEphemeral).
func (r *Registry) pruneEmpty(conn *zk.Conn, dir string) {
	for _, p := range []string{dir, path.Dir(dir)} {
		if err := conn.Delete(p, -1); err != nil {
			if !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoNode) {
				r.log.Debug("zookeeper: prune empty node", zap.String("node", p), zap.Error(err))
			}
			return
		}
	}
}

// ensurePath creates the persistent nodes of p that are missing.
func (r *Registry) ensurePath(conn *zk.Conn, p string) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		_, err := conn.Create(cur, nil, 0, r.acl)
		switch {
		case err == nil:
			r.markACL(cur, r.acl)
		case errors.Is(err, zk.ErrNodeExists):
			r.checkACLs(conn, cur)
		default:
			return err
		}
	}
	return nil
}

// servicePath returns /{root}/{escaped interface}.
func (r *Registry) servicePath(iface string) string {
	return "/" + r.opts.Root + "/" + url.QueryEscape(iface)
}

// NodePath returns the node a URL is registered at:
// /{root}/{interface}/{category}/{escaped URL}.
func (r *Registry) NodePath(u *protocol.URL) string {
	return r.servicePath(u.Interface()) + "/" + registry.CategoryOf(u) + "/" + u.Escaped()
}

// CategoryPath returns the node holding a category of a service, for
// example /dubbo/demo.Greeter/providers.
func (r *Registry) CategoryPath(iface, category string) string {
	return r.servicePath(iface) + "/" + category
}

func validate(u *protocol.URL) error {
	if u == nil {
		return errors.New("zookeeper registry: nil URL")
	}
	if u.Interface() == "" {
		return fmt.Errorf("zookeeper registry: URL %s names no interface", u)
	}
	return nil
}

// permanent reports errors that retrying will not fix.
func permanent(err error) bool {
	return errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrInvalidACL) ||
		errors.Is(err, zk.ErrAuthFailed) || errors.Is(err, zk.ErrBadArguments) ||
		errors.Is(err, zk.ErrInvalidPath)
}

// Register publishes u as an ephemeral node under its category and keeps it
// there until Unregister or Close, across reconnects, session expiry and
// ZooKeeper data loss. When a session is up, Register waits (bounded by
// ctx) for the first attempt and returns an error that retrying cannot fix
// (no permission, bad path); transient failures are retried in the
// background and Register returns nil. While no session is up it waits
// at most Options.RegisterWait for one, then returns nil and registers as
// soon as a session is up.
func (r *Registry) Register(ctx context.Context, u *protocol.URL) error {
	if err := validate(u); err != nil {
		return err
	}
	p := r.NodePath(u)
	if err := zkValidPath(p); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	g, ok := r.regs[p]
	if !ok {
		g = &reg{url: u, path: p, tried: make(chan struct{})}
		r.regs[p] = g
	}
	delete(r.deletes, p) // a pending delete's waiter sees it never happen: fine, it was re-registered
	poke(r.kick)
	r.mu.Unlock()
	wait := time.NewTimer(r.opts.RegisterWait)
	defer wait.Stop()
	select {
	case <-g.tried:
	case <-ctx.Done():
		return nil
	case <-wait.C:
		r.log.Warn("zookeeper: no session; registration continues in the background", zap.String("url", u.String()))
		return nil
	}
	if g.err != nil && permanent(g.err) {
		r.mu.Lock()
		if r.regs[p] == g {
			delete(r.regs, p)
		}
		r.mu.Unlock()
		return fmt.Errorf("zookeeper registry: register %s: %w", u, g.err)
	}
	return nil
}

func zkValidPath(p string) error {
	if len(p) > 32*1024 {
		return fmt.Errorf("zookeeper registry: node path too long (%d bytes)", len(p))
	}
	return nil
}

// Unregister removes u's node. When a session is up it waits until the
// node is deleted, at most until ctx is done or Options.RegisterWait has
// passed; the delete is retried in the background until it succeeds. Unregistering what was not registered is not an error.
func (r *Registry) Unregister(ctx context.Context, u *protocol.URL) error {
	if err := validate(u); err != nil {
		return err
	}
	p := r.NodePath(u)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	delete(r.regs, p)
	d, ok := r.deletes[p]
	if !ok {
		d = &pendingDelete{done: make(chan struct{})}
		r.deletes[p] = d
	}
	up := r.hasSession
	poke(r.kick)
	r.mu.Unlock()
	if !up {
		return nil
	}
	wait := time.NewTimer(r.opts.RegisterWait)
	defer wait.Stop()
	select {
	case <-d.done:
	case <-ctx.Done():
	case <-wait.C:
		r.log.Warn("zookeeper: unregister not done yet; continues in the background", zap.String("url", u.String()))
	}
	return nil
}

// Close deletes this process's nodes (when a session is up), stops every
// subscription, closes the ZooKeeper connection (which ends the session)
// and waits for its goroutines. It is idempotent.
//
// It is bounded: when the registration loop or the deletes are still
// waiting for ZooKeeper after Options.RegisterWait (a server that stopped
// answering keeps a request for up to two thirds of the session timeout,
// and the next ones for longer), Close drops the connection, which fails
// those requests at once, and the nodes are left to expire with the
// session. CloseContext also stops waiting when its context is done.
func (r *Registry) Close() error { return r.CloseContext(context.Background()) }

// CloseContext is Close, waiting for ZooKeeper at most until ctx is done
// (and never longer than Close does).
func (r *Registry) CloseContext(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.settle != nil {
		r.settle.Stop()
	}
	close(r.quit)
	for s := range r.subs {
		s.stop()
	}
	r.subs = map[*sub]struct{}{}
	// Closed: the watchdog dials no more, so this is the last connection.
	conn, socks := r.conn, r.socks
	r.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		r.loopWG.Wait()
		r.deleteOwnOnClose()
	}()
	wait := time.NewTimer(r.opts.RegisterWait)
	defer wait.Stop()
	select {
	case <-done:
		if conn != nil {
			conn.Close() // ends the session at once when ZooKeeper answers
		}
		socks.close()
	case <-wait.C:
		r.dropConn(conn, socks, done, "after "+r.opts.RegisterWait.String())
	case <-ctx.Done():
		r.dropConn(conn, socks, done, "when the context ended")
	}
	r.subWG.Wait()
	return nil
}

// dropConn closes conn's sockets and then conn, failing the requests
// still waiting for ZooKeeper, and waits for done. Closing the sockets
// first spares zk.Conn.Close its wait (up to 1 s) for the server to
// answer its close request.
func (r *Registry) dropConn(conn *zk.Conn, socks *sockets, done <-chan struct{}, when string) {
	r.log.Warn("zookeeper: close: requests still waiting for ZooKeeper "+when+"; dropping the connection (this process's nodes go when the session expires)",
		zap.String("address", r.address))
	socks.close()
	if conn != nil {
		conn.Close()
	}
	<-done
}

// deleteOwnOnClose deletes this process's nodes when a session is up, so
// that consumers see them go at once rather than when the session expires.
func (r *Registry) deleteOwnOnClose() {
	r.mu.Lock()
	conn, sid, has := r.conn, r.sessionID, r.hasSession
	paths := make([]string, 0, len(r.regs))
	for p := range r.regs {
		paths = append(paths, p)
	}
	r.regs = map[string]*reg{}
	r.mu.Unlock()
	if !has || conn == nil {
		return
	}
	for _, p := range paths {
		if err := r.deleteOwn(conn, p, sid); err != nil {
			r.log.Warn("zookeeper: unregister on close failed", zap.String("node", p), zap.Error(err))
			if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrClosing) {
				return
			}
		}
	}
}

// sortedStrings returns a sorted copy.
func sortedStrings(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// anyServing asks each server with the srvr command whether it serves
// clients (its answer names its Mode), within half a second each.
func (r *Registry) anyServing() bool {
	for _, s := range r.servers {
		c, err := net.DialTimeout("tcp", s, 500*time.Millisecond)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = c.Write([]byte("srvr"))
		var out []byte
		if err == nil {
			out, _ = io.ReadAll(io.LimitReader(c, 4096))
		}
		c.Close()
		if bytes.Contains(out, []byte("\nMode: ")) {
			return true
		}
	}
	return false
}
