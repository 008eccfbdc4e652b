package transport

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Server accepts connections and serves each with a Handler. It is safe
// for concurrent use.
type Server struct {
	h       Handler
	opts    Options
	invalid error // opts.Validate(), returned by Serve

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	closed    bool
	pending   int            // TLS handshakes under way
	wg        sync.WaitGroup // handshakes and connections
	refused   atomic.Uint64
	failedTLS atomic.Uint64
	budget    *Budget
	counts    serverCounts
}

// Budget returns the memory budget the server's connections are charged
// to (Options.Budget, or the server's own of Options.MaxMemory).
func (s *Server) Budget() *Budget { return s.budget }

// Throttled returns how many times one of the server's connections
// stopped reading because the memory budget was used up
// (Options.MaxMemory).
func (s *Server) Throttled() uint64 { return s.counts.throttled.Load() }

// Reclaimed returns how many of the server's connections its memory
// budget closed to get memory back while others waited for it (see
// Budget.Reclaimed): peers far behind in sending a frame, and peers that
// took none of their answers for FrameTimeout.
func (s *Server) Reclaimed() uint64 { return s.counts.reclaimed.Load() }

// ThrottledByIP returns how many times one of the server's connections
// stopped reading because the frames in progress from its peer's IP
// address held Options.MaxMemoryPerIP (see Budget.ThrottledByIP).
func (s *Server) ThrottledByIP() uint64 { return s.counts.ipThrottled.Load() }

// Refused returns how many connections were closed at once because
// Options.MaxConns were open.
func (s *Server) Refused() uint64 { return s.refused.Load() }

// FailedHandshakes returns how many connections a TLS server closed
// because their TLS handshake failed (a consumer without the right
// certificate or CA, a plain TCP peer, a handshake slower than
// Options.HandshakeTimeout).
func (s *Server) FailedHandshakes() uint64 { return s.failedTLS.Load() }

// admit reports whether one more connection may open (s.mu is held), and
// counts and logs a refusal.
func (s *Server) admit(nc net.Conn) bool {
	if len(s.conns)+s.pending < s.opts.MaxConns {
		return true
	}
	if n := s.refused.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... refusal
		s.opts.Logger.Warn("connection limit reached: closing new connections",
			zap.Int("max_conns", s.opts.MaxConns), zap.Stringer("peer", nc.RemoteAddr()), zap.Uint64("refused", n))
	}
	return false
}

// NewServer returns a server that serves connections with h; opts may be
// nil. Invalid opts (see Options.Validate) make Serve return the error.
func NewServer(h Handler, opts *Options) *Server {
	s := &Server{
		h:         h,
		opts:      opts.withDefaults(),
		invalid:   opts.Validate(),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*Conn]struct{}{},
	}
	s.budget = s.opts.Budget
	if s.budget == nil {
		s.budget = NewBudget(budgetLimit(&s.opts))
	}
	if !s.budget.claim(roleServer) && s.invalid == nil {
		s.invalid = errors.New("transport: Options.Budget is charged by connections Dial made (the answers they read): a Server needs another (or none: its own of MaxMemory), else a handler that calls out while its request holds memory could wait for its own memory")
	}
	if s.opts.MaxMemoryPerIP <= 0 {
		s.opts.MaxMemoryPerIP = s.budget.Limit() / 8
	}
	return s
}

// Listen listens on addr ("127.0.0.1:0" picks a free port) and returns the
// listener, for Serve.
func Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// Serve accepts connections on l until Close, backing off on temporary
// errors, and returns ErrServerClosed after Close or the accept error that
// stopped it. It closes l. It returns at once, with the error, when the
// server's options are invalid.
func (s *Server) Serve(l net.Listener) error {
	if s.invalid != nil {
		l.Close()
		return s.invalid
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.opts.Logger.Warn("accept", zap.Error(err), zap.Duration("retry", backoff))
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if s.opts.TLS == nil {
			s.add(nc, false)
			continue
		}
		s.mu.Lock()
		if s.closed || !s.admit(nc) {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.pending++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
			conn, plain := s.sniff(nc)
			if plain { // counted by sniff
				nc.Close()
				s.mu.Lock()
				s.pending--
				s.mu.Unlock()
				return
			}
			tc := tls.Server(&countingConn{Conn: conn}, s.opts.TLS)
			if err := tc.Handshake(); err != nil {
				s.failedTLS.Add(1)
				s.opts.Logger.Debug("tls handshake", zap.Stringer("peer", nc.RemoteAddr()), zap.Error(err))
				nc.Close()
				s.mu.Lock()
				s.pending--
				s.mu.Unlock()
				return
			}
			_ = tc.SetDeadline(time.Time{})
			s.add(tc, true)
		}()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// add serves nc; admitted says that a handshake already took its place
// (counted in pending).
func (s *Server) add(nc net.Conn, admitted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if admitted {
		s.pending--
	}
	if s.closed || !admitted && !s.admit(nc) {
		nc.Close()
		return
	}
	s.wg.Add(1)
	c := newConn(nc, serverHandler{s}, &s.opts, s.budget, &s.counts)
	s.conns[c] = struct{}{}
}

type serverHandler struct{ s *Server }

func (h serverHandler) Serve(c *Conn, f *Buffer) { h.s.h.Serve(c, f) }

func (h serverHandler) Closed(c *Conn, err error) {
	h.s.mu.Lock()
	delete(h.s.conns, c)
	h.s.mu.Unlock()
	h.s.h.Closed(c, err)
	h.s.wg.Done()
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// StopAccepting closes the listeners; connections already open stay.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		l.Close()
	}
}

// Close stops accepting, closes every connection (writing what is queued
// on each, for at most a second) and waits for their goroutines. It is
// idempotent.
func (s *Server) Close() error { return s.close(true) }

// CloseNow is Close without writing what is queued: every connection is
// closed at once.
func (s *Server) CloseNow() error { return s.close(false) }

func (s *Server) close(graceful bool) error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown(ErrClosed, graceful)
	}
	s.wg.Wait()
	return nil
}

// sniff reads the first two bytes of a connection to a TLS server (its
// deadline set): when they are the frame magic, the peer speaks plain TCP
// to a TLS port, and sniff reads the rest of the frame header, writes
// Options.PlainOnTLS's answer and reports plain. Otherwise it returns a
// connection that reads those two bytes again, for the handshake.
func (s *Server) sniff(nc net.Conn) (net.Conn, bool) {
	if s.opts.PlainOnTLS == nil {
		return nc, false
	}
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(nc, hdr[:2]); err != nil {
		s.failedTLS.Add(1)
		return nc, true // nothing to hand to a handshake
	}
	if binary.BigEndian.Uint16(hdr[:2]) != Magic {
		return &prefixConn{Conn: nc, prefix: hdr[:2]}, false
	}
	s.failedTLS.Add(1) // before the answer, so whoever reads it sees the count
	if _, err := io.ReadFull(nc, hdr[2:]); err == nil {
		if answer := s.opts.PlainOnTLS(hdr[:]); len(answer) > 0 {
			if _, err := nc.Write(answer); err == nil {
				// Read the frame's body (up to a bound, within the
				// deadline) before closing: closing with unread bytes
				// resets the connection, which can destroy the answer
				// before the peer reads it.
				if tc, ok := nc.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				body := int64(binary.BigEndian.Uint32(hdr[HeaderSize-4:]))
				_, _ = io.CopyN(io.Discard, nc, min(body, plainDrain))
			}
		}
	}
	s.opts.Logger.Debug("plain TCP on a TLS port", zap.Stringer("peer", nc.RemoteAddr()))
	return nc, true
}

// plainDrain bounds the bytes of a plain frame a TLS server reads after
// answering it.
const plainDrain = 1 << 20

// prefixConn reads prefix before the rest of the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

// SyscallConn is the TCP connection's, so that the reclaimer can still
// tell the bytes waiting in the socket (socketUnread) of a TLS connection
// over a prefixConn.
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) { return syscallConnOf(c.Conn) }

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
