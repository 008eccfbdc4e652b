package exchange

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/transport"
)

// ErrServerClosed is returned by Server.Serve after Close or Shutdown.
var ErrServerClosed = transport.ErrServerClosed

// maxErrorMessage bounds the error message sent in a non-OK response.
const maxErrorMessage = 4 << 10

// Request is a request handed to a Handler.
type Request struct {
	Header
	// Body is the request body; it is valid until Handle returns.
	Body []byte
	// RemoteAddr is the consumer's address.
	RemoteAddr net.Addr
}

// Handler answers requests; protocol/dubbo implements it. The server calls
// it from its own goroutines, at most Options.MaxConcurrent at once.
type Handler interface {
	// Handle answers req with a response frame built with NewFrame (the
	// server fills in its header), or with an error, which is sent as the
	// status StatusOf(err) with err.Error() as the message, so the
	// message reaches the consumer. ctx is cancelled when the request's
	// connection or the server closes.
	Handle(ctx context.Context, req *Request) (*transport.Buffer, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, req *Request) (*transport.Buffer, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (*transport.Buffer, error) {
	return f(ctx, req)
}

// Server serves requests on any number of listeners. Dispatch is bounded:
// a request that finds Options.MaxConcurrent requests running is answered
// StatusServerBusy at once instead of queueing.
type Server struct {
	h    Handler
	opts Options
	ts   *transport.Server
	sem  chan struct{}

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight int
	shutting bool
	connCtx  map[*transport.Conn]connContext // cancelled when the conn closes
	drained  chan struct{}                   // closed when shutting and inflight reaches 0

	busy      atomic.Uint64
	wg        sync.WaitGroup // dispatch goroutines
	hbWg      sync.WaitGroup
	stop      chan struct{}
	closeOnce sync.Once
}

// NewServer returns a Server that answers requests with h; opts may be
// nil. It starts a goroutine that closes idle connections; Close stops it.
func NewServer(h Handler, opts *Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	s := &Server{
		h:       h,
		opts:    o,
		sem:     make(chan struct{}, o.MaxConcurrent),
		drained: make(chan struct{}),
		stop:    make(chan struct{}),
		connCtx: map[*transport.Conn]connContext{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ts = transport.NewServer(serverHandler{s}, o.transport())
	s.hbWg.Go(s.closeIdle)
	return s, nil
}

// Serve accepts connections on l until Close or Shutdown, then returns
// ErrServerClosed. It closes l.
func (s *Server) Serve(l net.Listener) error { return s.ts.Serve(l) }

// Busy returns how many requests were answered StatusServerBusy.
func (s *Server) Busy() uint64 { return s.busy.Load() }

// Conns returns how many connections are open.
func (s *Server) Conns() int { return len(s.ts.Conns()) }

// Shutdown stops the server gracefully: it stops accepting, tells every
// connected client that it is shutting down (clients then send no new
// calls; requests that still arrive are answered StatusReadOnly, not
// executed), waits until the requests in progress end or ctx is done, and
// closes. It returns ctx's error if ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shutting {
		s.shutting = true
		if s.inflight == 0 {
			close(s.drained)
		}
	}
	s.mu.Unlock()
	s.ts.StopAccepting()
	for _, conn := range s.ts.Conns() {
		f := NewFrame()
		f.B = append(f.B, readOnlyEvent...)
		h := Header{Request: true, Event: true, Length: uint32(len(readOnlyEvent))}
		h.Put(f.B)
		_ = conn.Send(f)
	}
	var err error
	select {
	case <-s.drained:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	return err
}

// Close closes every connection and listener at once, cancels the context
// of the requests in progress and waits for them and for the server's
// goroutines. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.cancel()
	})
	s.ts.Close()
	s.wg.Wait()
	s.hbWg.Wait()
	return nil
}

// closeIdle closes connections that sent nothing for 3 heartbeat intervals.
func (s *Server) closeIdle() {
	hb := s.opts.Heartbeat
	t := time.NewTicker(hb)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			for _, conn := range s.ts.Conns() {
				if idle := now.Sub(conn.LastRead()); idle >= 3*hb {
					s.opts.Logger.Debug("closing idle connection", zap.Stringer("peer", conn.RemoteAddr()), zap.Duration("idle", idle))
					conn.Abort(fmt.Errorf("%w: %s idle for %v", ErrConnLost, conn.RemoteAddr(), idle))
				}
			}
		}
	}
}

// done ends one request counted in inflight.
func (s *Server) done() {
	s.mu.Lock()
	s.inflight--
	if s.shutting && s.inflight == 0 {
		close(s.drained)
	}
	s.mu.Unlock()
}

type serverHandler struct{ s *Server }

func (h serverHandler) Serve(conn *transport.Conn, f *transport.Buffer) {
	s := h.s
	hdr, err := ParseHeader(f.B)
	if err != nil {
		f.Release()
		conn.Abort(err)
		return
	}
	if hdr.Event || !hdr.Request {
		if hdr.Event && hdr.Request && hdr.TwoWay {
			answerHeartbeat(conn, hdr)
		}
		f.Release()
		return
	}
	s.mu.Lock()
	if s.shutting {
		s.mu.Unlock()
		f.Release()
		if hdr.TwoWay {
			s.reply(conn, hdr, nil, ErrReadOnly)
		}
		return
	}
	s.inflight++
	cc, ok := s.connCtx[conn]
	if !ok {
		cc.ctx, cc.cancel = context.WithCancel(s.ctx)
		s.connCtx[conn] = cc
	}
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	default:
		f.Release()
		s.done()
		s.busy.Add(1)
		if hdr.TwoWay {
			s.reply(conn, hdr, nil, fmt.Errorf("%w: %d requests in progress", ErrServerBusy, s.opts.MaxConcurrent))
		}
		return
	}
	s.wg.Add(1)
	go s.dispatch(cc.ctx, conn, hdr, f)
}

type connContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// Closed cancels the context of the connection's requests in progress.
func (h serverHandler) Closed(conn *transport.Conn, _ error) {
	h.s.mu.Lock()
	cc, ok := h.s.connCtx[conn]
	delete(h.s.connCtx, conn)
	h.s.mu.Unlock()
	if ok {
		cc.cancel()
	}
}

func (s *Server) dispatch(ctx context.Context, conn *transport.Conn, hdr Header, f *transport.Buffer) {
	defer s.wg.Done()
	defer s.done()
	defer func() { <-s.sem }()
	resp, err := s.handle(ctx, hdr, f, conn)
	f.Release()
	if !hdr.TwoWay {
		if resp != nil {
			resp.Release()
		}
		return
	}
	s.reply(conn, hdr, resp, err)
}

func (s *Server) handle(ctx context.Context, hdr Header, f *transport.Buffer, conn *transport.Conn) (resp *transport.Buffer, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logger.Error("handler panicked", zap.Any("panic", r))
			resp, err = nil, fmt.Errorf("%w: handler panicked: %v", ErrServerError, r)
		}
	}()
	req := &Request{Header: hdr, Body: Body(f), RemoteAddr: conn.RemoteAddr()}
	return s.h.Handle(ctx, req)
}

// reply sends the response to req: resp with an OK status, or err's status
// and message. A response over the payload limit is replaced by a
// StatusPayloadTooLarge answer.
func (s *Server) reply(conn *transport.Conn, req Header, resp *transport.Buffer, err error) {
	if err == nil && resp == nil {
		resp = NewFrame()
	}
	if err == nil {
		if n := len(resp.B) - HeaderSize; n > s.opts.MaxPayload {
			resp.Release()
			resp = nil
			err = fmt.Errorf("%w: response of %d bytes, limit %d", ErrPayloadTooLarge, n, s.opts.MaxPayload)
		}
	}
	status := StatusOf(err)
	if err != nil {
		if resp != nil {
			resp.Release()
		}
		msg := err.Error()
		if len(msg) > maxErrorMessage {
			msg = msg[:maxErrorMessage]
		}
		resp = NewFrame()
		resp.B = append(resp.B, msg...)
	}
	h := Header{Serializer: req.Serializer, Status: status, ID: req.ID, Length: uint32(len(resp.B) - HeaderSize)}
	h.Put(resp.B)
	_ = conn.Send(resp)
}
