package exchange

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/transport"
)

// Defaults of Options; DefaultOptions returns them all. protocol/dubbo and
// config refer to these instead of repeating them.
const (
	// DefaultMaxPayload is the transport's: one limit, declared there.
	DefaultMaxPayload = transport.DefaultMaxPayload
	// DefaultHeartbeat is the idle time after which a heartbeat is sent.
	DefaultHeartbeat = 30 * time.Second
	// DefaultIdleTimeout is how long a Server keeps a connection that
	// sends nothing, not even heartbeats: 3 heartbeats (3 × Heartbeat
	// when Heartbeat is set and IdleTimeout is not).
	DefaultIdleTimeout = 3 * DefaultHeartbeat
	// DefaultWorkers bounds a Server's worker pool; workers start as
	// requests need them, so a light load runs on a few.
	DefaultWorkers = 512
	// DefaultQueue is how many requests a Server holds read and waiting for
	// a worker before it stops reading connections.
	DefaultQueue = 1024
	// DefaultWorkerIdle is how long a worker waits for a request before it
	// stops.
	DefaultWorkerIdle = time.Minute
)

// Options configure a Client or a Server. As in every layer's options: a
// nil *Options, and every zero field, mean the default (DefaultOptions
// shows them); a negative field is invalid (Validate). MaxConcurrent is
// the one setting whose zero is literal: no limit, which is its default.
type Options struct {
	// MaxPayload bounds frame bodies both ways (default
	// DefaultMaxPayload, 8 MiB). A request over it fails with
	// status.ErrPayloadTooLarge before it is sent; a response over it is replaced
	// by a status.PayloadTooLarge answer.
	MaxPayload int
	// Heartbeat is how long a connection may be idle before a heartbeat is
	// sent (default DefaultHeartbeat, 30 s). A client that has read
	// nothing for 2.5 heartbeats, the first heartbeat it sent meanwhile
	// unanswered for 1.5, takes its peer as dead; a server closes
	// connections after IdleTimeout.
	Heartbeat time.Duration
	// IdleTimeout is how long a Server keeps a connection from which it
	// reads nothing at all, neither requests nor heartbeats (default 3 ×
	// Heartbeat, DefaultIdleTimeout): then it closes it. Heartbeats keep a
	// connection open, but they are not requests: the server answers them
	// on the connection's reader, and they never take a worker, a place in
	// the queue or a MaxConcurrent slot, nor count in Held. A connection
	// whose reading the server paused (Queue, MaxMemory) is not idle.
	IdleTimeout time.Duration
	// Workers bounds the goroutines that run a Server's requests (default
	// DefaultWorkers). Workers are long-lived: one starts when requests
	// wait and none is idle, and stops after WorkerIdle without work; a
	// worker that finds 16 workers (2 per GOMAXPROCS, when more) idle
	// already stops at once, since every idle goroutine's stack costs
	// each garbage collection a scan.
	Workers int
	// Queue bounds the requests a Server has read and not yet handed to a
	// worker (default DefaultQueue). When it is full the server stops
	// reading the connection whose request does not fit until a place
	// frees up, so TCP pushes back and the client's calls wait; nothing is
	// refused. Heartbeats keep such a paused connection alive both ways.
	// The queue is fair: workers take the connections' requests in turn,
	// and a connection with nothing queued may always queue one request,
	// so that one connection's flood delays another's request by about
	// one request per busy connection, not by the whole queue.
	Queue int
	// WorkerIdle is how long an idle worker waits before it stops
	// (default DefaultWorkerIdle); see Workers for the surplus ones.
	WorkerIdle time.Duration
	// MaxConcurrent, when positive, is a limit set on purpose: a request
	// that finds MaxConcurrent requests held by the Server (queued or
	// running) is answered status.ServerBusy at once, and Busy counts it.
	// By default (0) there is no such limit: Workers and Queue push back
	// instead of refusing.
	MaxConcurrent int
	// TLS, when set, makes the connection speak TLS.
	TLS *tls.Config
	// MaxConns bounds a Server's open connections (default
	// transport.DefaultMaxConns); more are closed at once and counted
	// (Server.Refused).
	MaxConns int
	// FrameTimeout bounds the time from a frame's first byte to its last
	// (default transport.DefaultFrameTimeout, slow-loris). On a Client,
	// calls that time out behind a response in progress that got no byte
	// between two of their timeouts, and for at least a tenth of
	// FrameTimeout, close the connection (status.ErrConnLost naming the
	// provider) rather than wait for it: the responses queue behind that
	// one on the connection. Bytes waiting unread in the socket count as
	// come, and (on Linux, plain TCP or TLS) bytes a read took from it
	// and has not counted yet (transport.Conn.Reading).
	FrameTimeout time.Duration
	// MaxQueue bounds the memory of the frames queued on a connection and
	// not yet written, each counted with its whole buffer
	// (transport.Options.MaxQueue; default transport.DefaultMaxQueue,
	// 64 MiB). A Client's calls wait
	// while it is full; a heartbeat or response that finds it full closes
	// the connection with transport.ErrSlowPeer, which the calls find
	// wrapped with status.ErrConnLost (written) or status.ErrClosed (not
	// written).
	MaxQueue int
	// MaxMemory bounds the memory the frames of a Server's connections
	// hold together: requests read and not yet released (waiting for a
	// worker or running), and answers queued and not yet written
	// (transport.Options.MaxMemory; default transport.DefaultMaxMemory,
	// 256 MiB, or twice MaxPayload when more). When it is used up the
	// Server stops reading each connection whose next request does not
	// fit until memory is released, as when Queue is full: calls wait,
	// nothing is refused (Server.Throttled counts the stops). A
	// connection that holds nothing may still send a request of up to
	// 4 KiB. While connections wait, a peer far behind in sending a
	// request and one that takes none of its answers for FrameTimeout
	// are closed to get memory back (Server.Reclaimed). Clients have
	// their own: ReplyBudget.
	MaxMemory int
	// MaxMemoryPerIP bounds what the requests in progress (over 4 KiB,
	// charged their declared length from their header on, their bodies
	// still arriving) of the connections from one remote IP address hold
	// of the memory budget (transport.Options.MaxMemoryPerIP; default an
	// eighth of the budget, 32 MiB of the default one): a request that
	// would go over waits unread until that address's requests in
	// progress end (Server.ThrottledByIP counts the waits). Past its
	// fair share of the budget (the limit over the addresses busy with
	// requests in progress and one more; the whole budget for an address
	// busy alone), an address's requests in progress must also leave
	// that much free (see transport.Budget). MaxMemory or more: neither.
	MaxMemoryPerIP int
	// Budget, when set, is a memory budget shared with other Servers
	// (transport.Options.Budget); MaxMemory is then not used.
	Budget *transport.Budget
	// ReplyBudget, when set, bounds the responses in progress of the
	// Clients dialled with it (Dial; a process's clients share one): a
	// response over 4 KiB is charged its declared length from its header
	// until its body is read, and one that does not fit waits unread
	// (its connection stops reading, the provider's writes wait in TCP)
	// until responses in progress elsewhere end. So providers that
	// declare large responses and stall in them hold at most its limit
	// of the consumer's memory, whatever their number; and each provider
	// (address and port) has a fair share of it, the limit over the
	// providers connected: a response that would put its provider's
	// responses in progress over it is read only while it leaves a share
	// free (transport.Options.Budget). A call that times
	// out while its connection waits says so, and names the limit. While
	// responses wait, a response far behind the pace its FrameTimeout
	// implies is cut (transport.ErrSlowFrame, its calls fail with
	// status.ErrConnLost naming the provider). Responses of up to
	// 4 KiB and requests are not charged. Its limit must hold a frame of
	// MaxPayload. It must not be a budget a Server of the process charges
	// (Budget, MaxMemory): a method that calls out while its request
	// holds memory would wait for its own memory (Dial refuses one, and
	// a Server's Serve one that Dial charges). Default nil: no bound
	// across connections (each one's is MaxPayload in progress).
	ReplyBudget *transport.Budget
	// Logger (default zap.NewNop()).
	Logger *zap.Logger
}

// DefaultOptions returns the options a nil *Options stands for, every
// default written out (TLS and Logger nil: none; MaxMemoryPerIP 0: an
// eighth of the budget, whatever its limit).
func DefaultOptions() Options {
	return Options{
		MaxPayload:   DefaultMaxPayload,
		Heartbeat:    DefaultHeartbeat,
		IdleTimeout:  DefaultIdleTimeout,
		Workers:      DefaultWorkers,
		Queue:        DefaultQueue,
		WorkerIdle:   DefaultWorkerIdle,
		MaxConns:     transport.DefaultMaxConns,
		FrameTimeout: transport.DefaultFrameTimeout,
		MaxQueue:     transport.DefaultMaxQueue,
		MaxMemory:    transport.DefaultMaxMemory,
		// MaxMemoryPerIP stays 0: an eighth of the budget.
	}
}

// Validate returns an error naming the first invalid field: every count,
// size and duration must be zero (the default) or positive. A nil
// *Options is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	d := DefaultOptions()
	if err := optcheck.NonNegative("exchange",
		optcheck.Field{Name: "IdleTimeout", Value: int64(o.IdleTimeout), Default: optcheck.Said("the default, 3 heartbeats")},
		optcheck.Field{Name: "MaxPayload", Value: int64(o.MaxPayload), Default: d.MaxPayload},
		optcheck.Field{Name: "Heartbeat", Value: int64(o.Heartbeat), Default: d.Heartbeat},
		optcheck.Field{Name: "MaxConcurrent", Value: int64(o.MaxConcurrent), Default: nil},
		optcheck.Field{Name: "Workers", Value: int64(o.Workers), Default: d.Workers},
		optcheck.Field{Name: "Queue", Value: int64(o.Queue), Default: d.Queue},
		optcheck.Field{Name: "WorkerIdle", Value: int64(o.WorkerIdle), Default: d.WorkerIdle},
	); err != nil {
		return err
	}
	if o.ReplyBudget != nil {
		payload := o.MaxPayload
		if payload <= 0 {
			payload = d.MaxPayload
		}
		if l := o.ReplyBudget.Limit(); l < payload+HeaderSize {
			return fmt.Errorf("exchange: ReplyBudget's limit %d is less than one response of MaxPayload %d (and its %d-byte header): such a response could never be read; give it a larger limit or lower MaxPayload",
				l, payload, HeaderSize)
		}
	}
	return o.transport().Validate()
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	d := DefaultOptions()
	if c.MaxPayload <= 0 {
		c.MaxPayload = d.MaxPayload
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 3 * c.Heartbeat
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.Queue <= 0 {
		c.Queue = d.Queue
	}
	if c.WorkerIdle <= 0 {
		c.WorkerIdle = d.WorkerIdle
	}
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = d.FrameTimeout
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = d.MaxQueue
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (o *Options) transport() *transport.Options {
	return &transport.Options{MaxPayload: o.MaxPayload, TLS: o.TLS, Logger: o.Logger,
		MaxConns: o.MaxConns, FrameTimeout: o.FrameTimeout, MaxQueue: o.MaxQueue,
		MaxMemory: o.MaxMemory, MaxMemoryPerIP: o.MaxMemoryPerIP, Budget: o.Budget}
}
