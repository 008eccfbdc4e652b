package transport

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/optcheck"
)

// Defaults of Options; DefaultOptions returns them all. Layers above
// (exchange, protocol/dubbo, config) refer to these instead of repeating
// them.
const (
	// DefaultMaxPayload bounds the body length a peer may declare.
	DefaultMaxPayload = 8 << 20
	// DefaultHandshakeTimeout bounds a server-side TLS handshake.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultBufferSize sizes each connection's read and write buffers.
	DefaultBufferSize = 32 << 10
	// DefaultMaxQueue bounds the memory of frames queued and not yet
	// written.
	DefaultMaxQueue = 64 << 20
	// DefaultFrameTimeout bounds the time from a frame's first byte to its
	// last (slow-loris).
	DefaultFrameTimeout = 5 * time.Second
	// DefaultMaxConns bounds the connections a Server keeps open.
	DefaultMaxConns = 10000
)

// Options configure connections and servers. As in every layer's options:
// a nil *Options, and every zero field, mean the default (DefaultOptions
// shows them); a negative field is invalid (Validate).
type Options struct {
	// MaxPayload bounds the body length a peer may declare (default
	// DefaultMaxPayload, 8 MiB); a larger one closes the connection before
	// anything is allocated.
	MaxPayload int
	// TLS, when set, makes Dial and Server speak TLS.
	TLS *tls.Config
	// HandshakeTimeout bounds a server-side TLS handshake (default
	// DefaultHandshakeTimeout, 10 s).
	HandshakeTimeout time.Duration
	// MaxQueue bounds the memory of frames queued and not yet written
	// (default DefaultMaxQueue, 64 MiB): each counts its buffer whole
	// (capacity, not only the bytes to write) and what it holds, so a
	// flood of small frames to a peer that does not read is bounded as
	// well as a few large ones. A Send beyond it closes the connection
	// with ErrSlowPeer.
	MaxQueue int
	// ReadBufferSize and WriteBufferSize size the per-connection buffers
	// (default DefaultBufferSize, 32 KiB each). They are taken from a pool
	// only while data flows: an idle connection holds neither.
	ReadBufferSize, WriteBufferSize int
	// FrameTimeout bounds the time between the first byte of a frame and
	// its last (default DefaultFrameTimeout, 5 s); a peer slower than that
	// is cut off with ErrSlowFrame. An idle connection (between frames) has
	// no deadline.
	FrameTimeout time.Duration
	// MaxConns bounds the connections a Server keeps open, TLS handshakes
	// included (default DefaultMaxConns, 10,000); connections over it are
	// closed at once and counted (Server.Refused).
	MaxConns int
	// PlainOnTLS, when set, is what a TLS server answers a peer that sends
	// a frame in plain TCP instead of a TLS handshake (a consumer without
	// TLS): it gets that frame's header and returns the bytes to write
	// back before the connection is closed (nil: nothing), so the peer
	// can be told why rather than see its connection dropped.
	PlainOnTLS func(header []byte) []byte
	// MaxMemory bounds the memory that the frames of a Server's
	// connections hold together, read and not yet released or queued and
	// not yet written (default DefaultMaxMemory, 256 MiB, or twice
	// MaxPayload when that is more). When it is used up the Server stops
	// reading the connections whose next frame does not fit until memory
	// is released: their peers' writes wait in TCP, nothing is refused.
	// Meanwhile it closes the peers that hold memory without doing their
	// part (a frame far behind its pace, answers not taken for
	// FrameTimeout: Server.Reclaimed); see Budget.
	// Connections made with NewConn, and with Dial unless Budget is
	// set, have no budget.
	MaxMemory int
	// MaxMemoryPerIP bounds what the frames in progress (over 4 KiB,
	// charged their declared length at their header, their bodies still
	// arriving) of a Server's connections from one remote IP address
	// hold of the memory budget together (default an eighth of the
	// budget's limit: DefaultMaxMemoryPerIP, 32 MiB, for the default
	// budget). A frame that would go over waits unread, nothing charged,
	// until that address's frames in progress end (counted:
	// Server.ThrottledByIP); one frame in progress is always let in. So
	// peers that declare large frames and send little, reconnecting each
	// time they are cut off, hold at most this much per address, not the
	// whole budget. An address whose frames in progress are over its
	// fair share (the budget's limit over the addresses busy with frames
	// in progress and one more, at most those with connections; the
	// whole budget for an address busy alone) is also charged a frame
	// only while that leaves a fair share of the budget free (see
	// Budget). Set it to MaxMemory or more
	// for neither bound.
	MaxMemoryPerIP int
	// Budget, when set, is the memory budget a Server charges instead of
	// one of its own of MaxMemory bytes: Servers given the same Budget
	// share it, so that it bounds a process's frames across them.
	//
	// Given to Dial, it bounds the frames the connections it dials read
	// (their peers' answers) while they are in progress: a frame over
	// 4 KiB is charged its declared length from its header until its body
	// is read (not while the Handler holds it), and when it does not fit
	// the connection stops reading until frames in progress elsewhere
	// end, as on a Server (including the reclaimer, which closes a frame
	// far behind its pace while others wait: ErrSlowFrame). Frames of up
	// to 4 KiB and the frames sent are not charged, and MaxMemoryPerIP
	// bounds nothing; but each peer (address and port: a provider) has a
	// fair share, the limit over the peers connected, as an address has
	// on a Server (see Budget): a peer's frame that would put its frames
	// in progress over it is charged only while it leaves a share free,
	// so one peer's stalled answers do not hold the room the others'
	// need (a frame too large to leave a share free is charged when the
	// budget is empty; for FrameTimeout after the reclaimer cut a frame
	// of its peer, it waits for a reservation instead). A budget is a
	// Server's or Dial's,
	// never both (Dial refuses a Server's, and Serve returns an error for
	// one Dial charges): a handler that calls out while its request holds
	// memory could then wait for its own memory.
	Budget *Budget
	// Logger receives connection events (default none).
	Logger *zap.Logger
}

// DefaultOptions returns the options a nil *Options stands for, every
// default written out (Logger nil: none; MaxMemoryPerIP 0: an eighth
// of the budget, whatever its limit).
func DefaultOptions() Options {
	return Options{
		MaxPayload:       DefaultMaxPayload,
		HandshakeTimeout: DefaultHandshakeTimeout,
		MaxQueue:         DefaultMaxQueue,
		ReadBufferSize:   DefaultBufferSize,
		WriteBufferSize:  DefaultBufferSize,
		FrameTimeout:     DefaultFrameTimeout,
		MaxConns:         DefaultMaxConns,
		MaxMemory:        DefaultMaxMemory,
		// MaxMemoryPerIP stays 0: an eighth of the budget, whatever
		// its limit (DefaultMaxMemoryPerIP for the default one).
	}
}

// Validate returns an error naming the first invalid field: every count,
// size and duration must be zero (the default) or positive. A nil
// *Options is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if err := optcheck.NonNegative("transport",
		optcheck.Field{Name: "MaxPayload", Value: int64(o.MaxPayload), Default: DefaultMaxPayload},
		optcheck.Field{Name: "HandshakeTimeout", Value: int64(o.HandshakeTimeout), Default: DefaultHandshakeTimeout},
		optcheck.Field{Name: "MaxQueue", Value: int64(o.MaxQueue), Default: DefaultMaxQueue},
		optcheck.Field{Name: "ReadBufferSize", Value: int64(o.ReadBufferSize), Default: DefaultBufferSize},
		optcheck.Field{Name: "WriteBufferSize", Value: int64(o.WriteBufferSize), Default: DefaultBufferSize},
		optcheck.Field{Name: "FrameTimeout", Value: int64(o.FrameTimeout), Default: DefaultFrameTimeout},
		optcheck.Field{Name: "MaxConns", Value: int64(o.MaxConns), Default: DefaultMaxConns},
		optcheck.Field{Name: "MaxMemory", Value: int64(o.MaxMemory), Default: memoryDefault},
		optcheck.Field{Name: "MaxMemoryPerIP", Value: int64(o.MaxMemoryPerIP), Default: "the default, an eighth of the memory budget"},
	); err != nil {
		return err
	}
	return MemoryFits("transport", o.MaxMemory, o.MaxPayload)
}

// memoryDefault says what a zero MaxMemory stands for.
var memoryDefault = fmt.Sprintf("the default, %d MiB or twice MaxPayload", DefaultMaxMemory>>20)

// MemoryFits returns an error, prefixed with pkg, when a memory budget of
// maxMemory bytes (zero: the default) could not hold one frame of
// maxPayload bytes (zero: DefaultMaxPayload): such a frame could never be
// read.
func MemoryFits(pkg string, maxMemory, maxPayload int) error {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if maxMemory > 0 && maxMemory < maxPayload+HeaderSize {
		return fmt.Errorf("%s: MaxMemory %d is less than one frame of MaxPayload %d (and its %d-byte header): such a frame could never be read; raise MaxMemory or lower MaxPayload",
			pkg, maxMemory, maxPayload, HeaderSize)
	}
	return nil
}

// withDefaults returns a copy of o with every zero field set to its
// default. Negative fields (which Validate refuses) are set to the default
// too, so that nothing runs with them.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	d := DefaultOptions()
	if c.MaxPayload <= 0 {
		c.MaxPayload = d.MaxPayload
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = d.MaxQueue
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = d.ReadBufferSize
	}
	if c.WriteBufferSize <= 0 {
		c.WriteBufferSize = d.WriteBufferSize
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = d.FrameTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}
