package dubbo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/transport"
)

// Name is the protocol name in URLs (dubbo://).
const Name = "dubbo"

// KeyTLS is set to "true" on the URL of a service exported on a TLS port,
// so that a consumer without TLS gets a clear error instead of a
// connection the provider drops.
const KeyTLS = "tls"

// KeyMTLS is set to "true" on the URL of a service exported on a port that
// requires and verifies client certificates (mutual TLS), so that a
// consumer without one gets a clear error instead of a refused handshake.
const KeyMTLS = "mtls"

// ErrTLSRequired is wrapped by the error of referring a provider whose URL
// says tls=true without a client TLS configuration.
var ErrTLSRequired = errors.New("the provider requires TLS (tls=true on its URL)")

// ErrClientCertRequired is wrapped by the error of referring a provider
// whose URL says mtls=true with a client TLS configuration that has no
// certificate.
var ErrClientCertRequired = errors.New("the provider requires a client certificate (mtls=true on its URL)")

// Defaults of Options; DefaultOptions returns them all. The limits this
// protocol hands to the layers below are theirs, declared there once.
const (
	DefaultConnections  = 1
	DefaultMaxPayload   = exchange.DefaultMaxPayload
	DefaultHeartbeat    = exchange.DefaultHeartbeat
	DefaultWorkers      = exchange.DefaultWorkers
	DefaultQueue        = exchange.DefaultQueue
	DefaultDialTimeout  = 3 * time.Second
	DefaultReconnect    = 100 * time.Millisecond
	DefaultMaxReconnect = 5 * time.Second
	// DefaultMaxAttachments and the three below bound the attachments of
	// one request or response.
	DefaultMaxAttachments      = serialize.DefaultMapEntries
	DefaultMaxAttachmentKey    = serialize.DefaultMapKey
	DefaultMaxAttachmentValue  = serialize.DefaultMapValue
	DefaultMaxAttachmentsBytes = serialize.DefaultMapBytes
	// DefaultMaxTimeout caps the call timeouts a consumer reads from a
	// URL.
	DefaultMaxTimeout = 60 * time.Second
	// DefaultMaxProviderTimeout bounds the context of every call a
	// provider runs, including calls that ask for no timeout.
	DefaultMaxProviderTimeout = 60 * time.Second
)

// Options configures a Protocol. As in every layer's options: a nil
// *Options, and every zero field, mean the default (DefaultOptions shows
// them); a negative field is invalid (Validate). MaxConcurrent is the one
// setting whose zero is literal: no limit, which is its default.
type Options struct {
	// Connections is the number of connections per provider address
	// (default 1). A call goes to the first connection with fewer than 16
	// calls in flight, so that calls that fit on one connection share its
	// writes and reads; when every connection has 16, calls are spread
	// over them in turn.
	Connections int
	// MaxPayload bounds every frame body in both directions (default
	// exchange.DefaultMaxPayload, 8 MiB). A larger request fails with status.ErrPayloadTooLarge
	// before it is sent; a larger response reaches the caller as the same
	// error.
	MaxPayload int
	// Heartbeat is the idle time after which a heartbeat is sent (default
	// exchange.DefaultHeartbeat, 30 s); a consumer that hears nothing from
	// its provider for 2.5 heartbeats (its first heartbeat since unanswered
	// for 1.5) takes it as dead and fails every call pending on it with
	// status.ErrConnLost, and a provider closes connections silent for
	// IdleTimeout (see exchange.Options.Heartbeat).
	Heartbeat time.Duration
	// IdleTimeout is how long a provider keeps a connection that sends
	// nothing, neither calls nor heartbeats (default 3 × Heartbeat,
	// exchange.DefaultIdleTimeout). Heartbeats keep a connection open but
	// never take a worker or a call slot (see exchange.Options.IdleTimeout).
	IdleTimeout time.Duration
	// Workers bounds the goroutines that run the calls of one provider
	// port (default DefaultWorkers); they start as calls need them.
	Workers int
	// Queue bounds the calls of one provider port read and waiting for a
	// worker (default DefaultQueue). When it is full the port stops
	// reading the connection whose call does not fit, so the consumer's
	// calls wait (back-pressure); none is refused.
	Queue int
	// MaxConcurrent, when positive, is a limit set on purpose on the calls
	// one provider port holds at once (queued or running): calls over it
	// are answered status.ErrServerBusy, which failover retries on
	// another provider. Default 0: no such limit.
	MaxConcurrent int
	// DialTimeout bounds one dial (default 3 s). A call waiting for the
	// first dial to its provider waits at most its own timeout (and its
	// context's deadline), whichever ends first; the dial goes on for the
	// calls after it.
	DialTimeout time.Duration
	// Reconnect is the first wait before re-dialling a lost connection
	// (default 100 ms); it doubles up to MaxReconnect (default 5 s).
	Reconnect, MaxReconnect time.Duration
	// ServerTLS, when set, makes exported ports speak TLS (ExportTLS sets
	// it per port). With ClientAuth set to tls.RequireAndVerifyClientCert
	// and ClientCAs, only consumers with a certificate those CAs signed
	// may connect (mutual TLS). A MinVersion below TLS 1.2 is raised to
	// TLS 1.2.
	ServerTLS *tls.Config
	// ClientTLS, when set, makes referred connections speak TLS (ReferTLS
	// sets it per invoker): RootCAs are the CAs trusted to sign
	// providers' certificates (nil: the system's), Certificates the
	// client's own for mutual TLS, ServerName the name to verify (default:
	// the provider's host). A MinVersion below TLS 1.2 is raised to TLS
	// 1.2.
	ClientTLS *tls.Config
	// Serializers holds the serializations known by name and id (default
	// serialize.Builtin()). A URL's serialization must be in it.
	Serializers *serialize.Table
	// MaxConnections bounds the connections one provider port keeps open
	// (default transport.DefaultMaxConns, 10,000); more are closed at once
	// and counted in Stats.RefusedConnections.
	MaxConnections int
	// FrameTimeout bounds the time from a frame's first byte to its last
	// on every connection (default transport.DefaultFrameTimeout, 5 s): a
	// peer that starts a frame and stalls is cut off (slow-loris). On the
	// consumer, calls that time out behind an answer that got no byte
	// for a tenth of it (and between two of their timeouts) close that
	// connection sooner, and it is dialled again (see
	// exchange.Options.FrameTimeout).
	FrameTimeout time.Duration
	// MaxQueue bounds the memory of the frames queued on one connection
	// and not yet written, each counted with its whole buffer, on both
	// sides (default transport.DefaultMaxQueue, 64 MiB):
	// a peer that stops reading has its connection closed with
	// transport.ErrSlowPeer, and the calls on it fail with
	// status.ErrConnLost (written) or status.ErrClosed (not written)
	// wrapping it (exchange.Options.MaxQueue).
	MaxQueue int
	// MaxMemory bounds the memory that the frames of all the exported
	// ports of the Protocol hold together (one budget, which its ports
	// share): calls read and not yet done with, answers not yet written
	// (default transport.DefaultMaxMemory, 256 MiB, or twice MaxPayload
	// when more). When it is used up a port stops reading a connection
	// whose next call does not fit until memory is freed: consumers'
	// calls wait, none is refused, and Stats.Throttled counts the stops.
	// A connection that holds nothing may still send a call of up to
	// 4 KiB, and a call that has waited a tenth of FrameTimeout gets the
	// memory reserved (no other call over 4 KiB is read until it fits;
	// see transport.Budget). While calls wait, consumers far behind in sending a
	// call and consumers that take none of their answers for
	// FrameTimeout are closed to get memory back (Stats.Reclaimed). A
	// call larger than MaxMemory closes its connection
	// (transport.ErrFrameTooLarge). See transport.Budget.
	MaxMemory int
	// MaxMemoryPerIP bounds what the calls in progress (over 4 KiB,
	// charged their declared length from their header on, their bodies
	// still arriving) of the consumers at one IP address hold of
	// MaxMemory (default an eighth of MaxMemory: 32 MiB of the default
	// 256 MiB). A call that would go over waits unread until that
	// address's calls in progress end (Stats.ThrottledByIP); one call in
	// progress per address is always read. So strangers that declare
	// large calls and send little, reconnecting each time they are cut
	// off, hold at most this much per address. MaxMemory or more: no
	// such bound (transport.Options.MaxMemoryPerIP).
	MaxMemoryPerIP int
	// MaxReplyMemory bounds the memory that the answers in progress on
	// all the Protocol's referred connections hold together, whatever
	// the number of providers and Connections (default
	// transport.DefaultMaxMemory, 256 MiB, or twice MaxPayload when
	// more): an answer over 4 KiB is charged its declared length from
	// its header until its body is read. An answer that does not fit
	// waits unread (reading its connection stops, the provider's writes
	// wait in TCP) until answers in progress elsewhere end, so
	// providers that declare large answers and stall in them hold at
	// most this much of the consumer's memory until FrameTimeout cuts
	// them; without it each referred connection could hold MaxPayload.
	// Each provider (address and port) has a fair share of it, this over
	// the providers connected: an answer that would put its provider's
	// answers in progress over it is read only while it leaves a share
	// free. Answers of up to 4 KiB never wait. A call that times out while its
	// connection waits says so and names this option
	// (Stats.ReplyThrottled counts the waits). While answers wait, one
	// far behind the pace its FrameTimeout implies is cut
	// (transport.ErrSlowFrame: its calls fail with status.ErrConnLost
	// naming the provider; Stats.ReplyReclaimed). It is the consumer's
	// own, never shared with MaxMemory's (a method that calls out would
	// wait for memory its own call holds). See
	// exchange.Options.ReplyBudget.
	MaxReplyMemory int
	// Attachments bounds the attachments of a request (on the provider)
	// and of a response (on the consumer): count, key and value length,
	// total bytes. Zero fields take DefaultMaxAttachments,
	// DefaultMaxAttachmentKey, DefaultMaxAttachmentValue and
	// DefaultMaxAttachmentsBytes (serialize.DefaultMapLimits);
	// serialize.NoLimit lifts a bound. A body over a bound is refused with an
	// error wrapping serialize.ErrLimit (status.ErrBadRequest on the
	// provider, status.ErrBadResponse on the consumer) and counted in
	// Stats.
	Attachments serialize.MapLimits
	// MaxTimeout caps the timeouts a consumer reads from a referred URL,
	// whoever wrote them (default 60 s): a provider advertising a longer
	// one, or one too large to represent, gets this much. A timeout
	// parameter that is not a positive integer is ignored (logged) and the
	// next in precedence applies.
	MaxTimeout time.Duration
	// MaxProviderTimeout bounds the context of a call on the provider
	// (default 60 s): a request asking for more, or for no timeout at all,
	// runs with this much.
	MaxProviderTimeout time.Duration
	// Logger receives connection-level events (default zap.NewNop()).
	Logger *zap.Logger
}

// DefaultOptions returns the options a nil *Options stands for, every
// default written out (TLS and Logger nil: none; a new
// serialize.Builtin() table; MaxMemoryPerIP 0: an eighth of MaxMemory).
func DefaultOptions() Options {
	return Options{
		Connections:    DefaultConnections,
		MaxPayload:     DefaultMaxPayload,
		Heartbeat:      DefaultHeartbeat,
		IdleTimeout:    exchange.DefaultIdleTimeout,
		Workers:        DefaultWorkers,
		Queue:          DefaultQueue,
		DialTimeout:    DefaultDialTimeout,
		Reconnect:      DefaultReconnect,
		MaxReconnect:   DefaultMaxReconnect,
		Serializers:    serialize.Builtin(),
		MaxConnections: transport.DefaultMaxConns,
		FrameTimeout:   transport.DefaultFrameTimeout,
		MaxQueue:       transport.DefaultMaxQueue,
		MaxMemory:      transport.DefaultMaxMemory,
		MaxReplyMemory: transport.DefaultMaxMemory,
		// MaxMemoryPerIP stays 0: an eighth of MaxMemory.
		Attachments:        serialize.DefaultMapLimits(),
		MaxTimeout:         DefaultMaxTimeout,
		MaxProviderTimeout: DefaultMaxProviderTimeout,
	}
}

// Validate returns an error naming the first invalid field: every count,
// size and duration must be zero (the default) or positive. A nil
// *Options is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if err := optcheck.NonNegative("dubbo",
		optcheck.Field{Name: "Connections", Value: int64(o.Connections), Default: DefaultConnections},
		optcheck.Field{Name: "MaxPayload", Value: int64(o.MaxPayload), Default: DefaultMaxPayload},
		optcheck.Field{Name: "Heartbeat", Value: int64(o.Heartbeat), Default: DefaultHeartbeat},
		optcheck.Field{Name: "IdleTimeout", Value: int64(o.IdleTimeout), Default: exchange.DefaultIdleTimeout},
		optcheck.Field{Name: "Workers", Value: int64(o.Workers), Default: DefaultWorkers},
		optcheck.Field{Name: "Queue", Value: int64(o.Queue), Default: DefaultQueue},
		optcheck.Field{Name: "MaxConcurrent", Value: int64(o.MaxConcurrent), Default: nil},
		optcheck.Field{Name: "DialTimeout", Value: int64(o.DialTimeout), Default: DefaultDialTimeout},
		optcheck.Field{Name: "Reconnect", Value: int64(o.Reconnect), Default: DefaultReconnect},
		optcheck.Field{Name: "MaxReconnect", Value: int64(o.MaxReconnect), Default: DefaultMaxReconnect},
		optcheck.Field{Name: "MaxConnections", Value: int64(o.MaxConnections), Default: transport.DefaultMaxConns},
		optcheck.Field{Name: "FrameTimeout", Value: int64(o.FrameTimeout), Default: transport.DefaultFrameTimeout},
		optcheck.Field{Name: "MaxQueue", Value: int64(o.MaxQueue), Default: transport.DefaultMaxQueue},
		optcheck.Field{Name: "MaxMemory", Value: int64(o.MaxMemory), Default: memoryDefault},
		optcheck.Field{Name: "MaxMemoryPerIP", Value: int64(o.MaxMemoryPerIP), Default: "the default, an eighth of MaxMemory"},
		optcheck.Field{Name: "MaxReplyMemory", Value: int64(o.MaxReplyMemory), Default: memoryDefault},
		optcheck.Field{Name: "Attachments.MaxEntries", Value: int64(o.Attachments.MaxEntries), Default: DefaultMaxAttachments},
		optcheck.Field{Name: "Attachments.MaxKey", Value: int64(o.Attachments.MaxKey), Default: DefaultMaxAttachmentKey},
		optcheck.Field{Name: "Attachments.MaxValue", Value: int64(o.Attachments.MaxValue), Default: DefaultMaxAttachmentValue},
		optcheck.Field{Name: "Attachments.MaxBytes", Value: int64(o.Attachments.MaxBytes), Default: DefaultMaxAttachmentsBytes},
		optcheck.Field{Name: "MaxTimeout", Value: int64(o.MaxTimeout), Default: DefaultMaxTimeout},
		optcheck.Field{Name: "MaxProviderTimeout", Value: int64(o.MaxProviderTimeout), Default: DefaultMaxProviderTimeout},
	); err != nil {
		return err
	}
	if err := transport.MemoryFits("dubbo", o.MaxMemory, o.MaxPayload); err != nil {
		return err
	}
	return replyMemoryFits(o.MaxReplyMemory, o.MaxPayload)
}

// memoryDefault says what a zero MaxMemory or MaxReplyMemory stands for.
var memoryDefault = fmt.Sprintf("the default, %d MiB or twice MaxPayload", transport.DefaultMaxMemory>>20)

// replyMemoryFits is MemoryFits for MaxReplyMemory.
func replyMemoryFits(maxReply, maxPayload int) error {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if maxReply > 0 && maxReply < maxPayload+exchange.HeaderSize {
		return fmt.Errorf("dubbo: MaxReplyMemory %d is less than one answer of MaxPayload %d (and its %d-byte header): such an answer could never be read; raise MaxReplyMemory or lower MaxPayload",
			maxReply, maxPayload, exchange.HeaderSize)
	}
	return nil
}

// withDefaults validates o and returns a copy with every zero field set
// to its default.
func (o *Options) withDefaults() (Options, error) {
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	var c Options
	if o != nil {
		c = *o
	}
	d := DefaultOptions()
	setInt := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	setDur := func(p *time.Duration, def time.Duration) {
		if *p == 0 {
			*p = def
		}
	}
	setInt(&c.Connections, d.Connections)
	setInt(&c.MaxPayload, d.MaxPayload)
	setDur(&c.Heartbeat, d.Heartbeat)
	setDur(&c.IdleTimeout, 3*c.Heartbeat)
	setInt(&c.Workers, d.Workers)
	setInt(&c.Queue, d.Queue)
	setDur(&c.DialTimeout, d.DialTimeout)
	setDur(&c.Reconnect, d.Reconnect)
	setDur(&c.MaxReconnect, d.MaxReconnect)
	c.MaxReconnect = max(c.MaxReconnect, c.Reconnect)
	setInt(&c.MaxConnections, d.MaxConnections)
	setDur(&c.FrameTimeout, d.FrameTimeout)
	setInt(&c.MaxQueue, d.MaxQueue)
	setInt(&c.MaxMemory, (&transport.Options{MaxPayload: c.MaxPayload}).BudgetLimit())
	setInt(&c.MaxMemoryPerIP, c.MaxMemory/8)
	setInt(&c.MaxReplyMemory, (&transport.Options{MaxPayload: c.MaxPayload}).BudgetLimit())
	setInt(&c.Attachments.MaxEntries, d.Attachments.MaxEntries)
	setInt(&c.Attachments.MaxKey, d.Attachments.MaxKey)
	setInt(&c.Attachments.MaxValue, d.Attachments.MaxValue)
	setInt(&c.Attachments.MaxBytes, d.Attachments.MaxBytes)
	setDur(&c.MaxTimeout, d.MaxTimeout)
	setDur(&c.MaxProviderTimeout, d.MaxProviderTimeout)
	if c.Serializers == nil {
		c.Serializers = d.Serializers
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.ServerTLS = minTLS12(c.ServerTLS)
	c.ClientTLS = minTLS12(c.ClientTLS)
	return c, nil
}

// minTLS12 returns cfg, or a copy of it with MinVersion raised to TLS 1.2
// when it allows older versions.
func minTLS12(cfg *tls.Config) *tls.Config {
	if cfg == nil || cfg.MinVersion >= tls.VersionTLS12 {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.MinVersion = tls.VersionTLS12
	return cfg
}

// Protocol is the dubbo protocol. It is safe for concurrent use.
//
// Errors a referred invoker returns, by class (protocol.Retryable reads
// them):
//   - not sent: status.ErrDial, status.ErrClosed (invoker or connection
//     closed; also when the caller's context ends, or the call's own
//     timeout runs out, while the first dial to the provider is under way,
//     and then the error wraps the context's error too (for a timeout,
//     context.DeadlineExceeded): errors.Is(err, context.DeadlineExceeded)
//     holds and the text says it was the deadline or which timeout, while
//     connecting to which address),
//     status.ErrReadOnly (the provider is shutting down),
//     status.ErrPayloadTooLarge for a request over the limit;
//   - sent, no answer: status.ErrTimeout (also wrapping
//     context.DeadlineExceeded when the deadline was the context's),
//     status.ErrConnLost;
//   - answered: a *service.Error with Remote set (the method's business
//     error, or service.CodePanic when it panicked), or a
//     *status.Error wrapping status.ErrServiceNotFound,
//     ErrBadRequest, ErrServerBusy, ErrPayloadTooLarge (a response over the
//     limit) or ErrServerError.
type Protocol struct {
	opts  Options
	stats stats
	// budget is the memory budget of every exported port (MaxMemory).
	budget *transport.Budget
	// replies is the budget of the answers in progress on every referred
	// connection (MaxReplyMemory); never budget.
	replies *transport.Budget

	mu      sync.Mutex
	servers map[string]*server // by requested host:port
	pools   map[poolKey]*pool  // by provider address and TLS configuration
	closed  bool

	abandoned atomic.Uint64
}

// Abandoned returns how many calls the protocol's servers gave up on when
// they closed: calls whose method had not returned by the shutdown
// deadline (they go on in the background; their answers are dropped), and
// calls still queued.
func (p *Protocol) Abandoned() uint64 { return p.abandoned.Load() }

// Options returns the options p runs with: those given to New with every
// zero field set to its default, so MaxMemory, MaxMemoryPerIP,
// MaxReplyMemory, FrameTimeout, MaxPayload and the rest are the values
// in force (a TLS MinVersion below 1.2 reads as raised). The result is a
// copy: changing it changes nothing in p (its ServerTLS and ClientTLS are
// clones; Serializers and Logger are the ones p uses).
func (p *Protocol) Options() Options {
	o := p.opts
	if o.ServerTLS != nil {
		o.ServerTLS = o.ServerTLS.Clone()
	}
	if o.ClientTLS != nil {
		o.ClientTLS = o.ClientTLS.Clone()
	}
	return o
}

var _ protocol.Protocol = (*Protocol)(nil)

// New returns a Protocol; opts may be nil. An invalid option is an error
// naming it.
func New(opts *Options) (*Protocol, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Protocol{opts: o, budget: transport.NewBudget(o.MaxMemory), replies: transport.NewBudget(o.MaxReplyMemory), servers: map[string]*server{}, pools: map[poolKey]*pool{}}, nil
}

// Export serves inv on the host and port of inv.URL() (port 0 picks a new
// free port, as net.Listen does; Exporter.URL tells which). Several
// services may share one port, exported on its real number; they are told
// apart by service key. If inv implements protocol.ArgTyper
// its arguments are decoded into the types it declares, else into plain
// values. The returned protocol.Exporter is an *Exporter.
func (p *Protocol) Export(inv protocol.Invoker) (protocol.Exporter, error) {
	e, err := p.export(inv, nil)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ExportTLS is Export on a port that speaks TLS with cfg (nil:
// Options.ServerTLS). The services of one port share its TLS
// configuration: exporting on a port already served with another is an
// error. The exported URL says tls=true, and mtls=true when cfg requires
// client certificates, so that consumers learn it from the registry.
func (p *Protocol) ExportTLS(inv protocol.Invoker, cfg *tls.Config) (*Exporter, error) {
	return p.export(inv, cfg)
}

// Refer returns an invoker for the provider at u. It does not touch the
// network: connections to u's address are shared by every invoker referring
// that address, dialled on the first call and re-dialled when they break.
// The invoker implements io.Closer and protocol.Available (false while its
// connection is down or the provider announced it is shutting down).
//
// A call ends at the sooner of its context's deadline and the URL's
// timeout for the method: "{method}.timeout", else "timeout", else
// protocol.DefaultTimeout, each capped by Options.MaxTimeout. (Which of the
// consumer's and the provider's values the URL holds is the caller's
// choice; config lays the consumer's over the provider's.)
func (p *Protocol) Refer(u *protocol.URL) (protocol.Invoker, error) {
	inv, err := p.refer(u, nil)
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// ReferTLS is Refer over connections that speak TLS with cfg (nil:
// Options.ClientTLS). Invokers of one address share connections only when
// they share a configuration. Referring a provider whose URL says tls=true
// without any TLS configuration is an error wrapping ErrTLSRequired; one
// whose URL says mtls=true with a configuration without a client
// certificate, ErrClientCertRequired.
func (p *Protocol) ReferTLS(u *protocol.URL, cfg *tls.Config) (protocol.Invoker, error) {
	inv, err := p.refer(u, cfg)
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// release drops one reference to pl and closes it after the last.
func (p *Protocol) release(pl *pool) {
	p.mu.Lock()
	pl.refs--
	last := pl.refs == 0 && p.pools[pl.key] == pl
	if last {
		delete(p.pools, pl.key)
	}
	p.mu.Unlock()
	if last {
		pl.close()
	}
}

// take empties the protocol's tables and marks it closed.
func (p *Protocol) take() ([]*server, []*pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	servers := make([]*server, 0, len(p.servers))
	for k, s := range p.servers {
		if s.keys[0] == k {
			servers = append(servers, s)
		}
	}
	pools := make([]*pool, 0, len(p.pools))
	for _, pl := range p.pools {
		pools = append(pools, pl)
	}
	clear(p.servers)
	clear(p.pools)
	return servers, pools
}

// Shutdown stops every server gracefully: it tells the consumers connected
// to them to send no new calls, waits for the calls in progress until ctx
// is done, then closes like Close.
func (p *Protocol) Shutdown(ctx context.Context) error {
	servers, pools := p.take()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.shutdown(ctx) })
	}
	wg.Wait()
	for _, pl := range pools {
		pl.close()
	}
	return errors.Join(errs...)
}

// Close stops every server and closes every connection at once; pending
// calls fail with status.ErrClosed. It is idempotent.
func (p *Protocol) Close() error {
	servers, pools := p.take()
	for _, s := range servers {
		s.close()
	}
	for _, pl := range pools {
		pl.close()
	}
	return nil
}

// Stats counts bad input a Protocol refused, since it was created.
type Stats struct {
	// BadAttachments counts requests (provider) and responses (consumer)
	// whose attachments broke Options.Attachments.
	BadAttachments uint64
	// BadBodies counts bodies refused by the serializer's limits
	// (nesting, declared lengths, allocation budget) or unreadable.
	BadBodies uint64
	// BadTokens counts requests refused for a missing or wrong token.
	BadTokens uint64
	// BadSerializations counts requests in a serialization the service was
	// not exported with.
	BadSerializations uint64
	// Panics counts provider methods that panicked.
	Panics uint64
	// Expired counts requests not run because their time (the request's
	// timeout, counted from when the provider read it) ran out while they
	// waited for a worker; each was answered status.ServerTimeout.
	Expired uint64
	// RefusedConnections counts connections to the exported ports closed
	// at once because Options.MaxConnections were open (ports still open).
	RefusedConnections uint64
	// Throttled counts the times an exported port stopped reading a
	// connection because the memory budget (Options.MaxMemory) was used
	// up (ports still open).
	Throttled uint64
	// MemoryHeld is what the frames of the exported ports hold of the
	// memory budget now, in bytes (Options.MaxMemory).
	MemoryHeld int
	// Reclaimed counts the connections the memory budget closed to get
	// memory back while calls waited for it: a consumer far behind in
	// sending a call whose declared length was charged
	// (transport.ErrSlowFrame), or one that took none of its answers for
	// FrameTimeout (transport.ErrSlowPeer). See transport.Budget.
	Reclaimed uint64
	// ThrottledByIP counts the times an exported port stopped reading a
	// connection because the calls in progress from its consumer's IP
	// address held Options.MaxMemoryPerIP.
	ThrottledByIP uint64
	// ReplyThrottled counts the times a referred connection stopped
	// reading because the answers in progress held
	// Options.MaxReplyMemory (the consumer's side of Throttled).
	ReplyThrottled uint64
	// ReplyMemoryHeld is what the answers in progress on the referred
	// connections hold of Options.MaxReplyMemory now, in bytes.
	ReplyMemoryHeld int
	// ReplyReclaimed counts the referred connections closed to get
	// memory back while answers waited for MaxReplyMemory: a provider
	// far behind in sending an answer (transport.ErrSlowFrame).
	ReplyReclaimed uint64
	// FailedHandshakes counts connections to TLS ports closed because
	// their TLS handshake failed: a consumer without TLS, without a
	// certificate the client CA signed, or too slow (ports still open).
	FailedHandshakes uint64
}

type stats struct {
	badAttachments, badBodies, badTokens, badSerializations, panics, expired atomic.Uint64
}

// Stats returns the counts of refused input.
func (p *Protocol) Stats() Stats {
	return Stats{
		BadAttachments:     p.stats.badAttachments.Load(),
		BadBodies:          p.stats.badBodies.Load(),
		BadTokens:          p.stats.badTokens.Load(),
		BadSerializations:  p.stats.badSerializations.Load(),
		Panics:             p.stats.panics.Load(),
		Expired:            p.stats.expired.Load(),
		RefusedConnections: p.sumServers((*exchange.Server).Refused),
		FailedHandshakes:   p.sumServers((*exchange.Server).FailedHandshakes),
		Throttled:          p.sumServers((*exchange.Server).Throttled),
		MemoryHeld:         p.budget.Used(),
		Reclaimed:          p.budget.Reclaimed(),
		ThrottledByIP:      p.budget.ThrottledByIP(),
		ReplyThrottled:     p.replies.Throttled(),
		ReplyMemoryHeld:    p.replies.Used(),
		ReplyReclaimed:     p.replies.Reclaimed(),
	}
}

// sumServers adds count up over the open ports.
func (p *Protocol) sumServers(count func(*exchange.Server) uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for k, s := range p.servers {
		if s.keys[0] == k {
			n += count(s.es)
		}
	}
	return n
}

// Exporter is a service served by a Protocol.
type Exporter struct {
	url  *protocol.URL
	inv  protocol.Invoker
	p    *Protocol
	s    *server
	key  string
	once sync.Once
	err  error
}

var _ protocol.Exporter = (*Exporter)(nil)

// URL returns the exported URL with the real port.
func (e *Exporter) URL() *protocol.URL { return e.url }

// Invoker returns the exported invoker; its URL is URL().
func (e *Exporter) Invoker() protocol.Invoker { return e.inv }

// Unexport stops serving the service; when it was the last service on its
// port, the port is closed. It is idempotent.
func (e *Exporter) Unexport() error {
	e.once.Do(func() { e.err = e.p.unexport(e) })
	return e.err
}
