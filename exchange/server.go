package exchange

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// ErrServerClosed is returned by Server.Serve after Close or Shutdown.
var ErrServerClosed = transport.ErrServerClosed

// maxErrorMessage bounds the error message sent in a non-OK response.
const maxErrorMessage = 4 << 10

// Request is a request handed to a Handler.
type Request struct {
	Header
	// Body is the request body; it is valid until Handle returns, when
	// the request's frame goes back to a pool to be read into again
	// (unless the handler set KeepBody).
	// A handler that answers with bytes of Body without copying them
	// (the response frame splices them: transport.Buffer.Splice) must
	// set KeepBody, or its response may send bytes of a later request.
	Body []byte
	// KeepBody, set by the handler before Handle returns, keeps Body's
	// bytes valid until the response frame Handle returns has been
	// written or dropped, when that frame has spliced bytes: the
	// response frame then holds the request's frame (transport.Buffer.
	// Hold). Unset, the request's frame is released as soon as Handle
	// returns, so a response that sends copies (the common case) does
	// not keep the request's memory alive while it waits to be written.
	KeepBody bool
	// RemoteAddr is the consumer's address.
	RemoteAddr net.Addr
	// Received is when the server read the request, before it waited
	// for a worker: a handler that bounds a request's time counts from
	// it, so that time spent in the queue counts.
	Received time.Time
	// Queued is set when the request went to a worker instead of running
	// at once on the goroutine that read it: only then may its time have
	// run out before it starts, so only then need a handler that drops
	// such requests read the clock.
	Queued bool
}

// Handler answers requests; protocol/dubbo implements it. The server calls
// it from its pool of workers, at most Options.Workers at once.
type Handler interface {
	// Handle answers req with a response frame built with NewFrame (the
	// server fills in its header), or with an error, which is sent as the
	// status status.CodeOf(err) with err.Error() as the message, so the
	// message reaches the consumer. ctx is cancelled when the request's
	// connection or the server closes.
	//
	// A Handler should recover the panics of the code it calls (the dubbo
	// protocol recovers those of filters and service methods, naming the
	// method). A panic that escapes Handle is the last-resort case: the
	// server answers status.ErrServerError with an incident id and logs the value
	// and stack under it, and keeps serving.
	//
	// req is the handler's until Handle returns, not after: the server
	// uses it again for a later request of the connection.
	Handle(ctx context.Context, req *Request) (*transport.Buffer, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, req *Request) (*transport.Buffer, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (*transport.Buffer, error) {
	return f(ctx, req)
}

// abandonAfter bounds how long Close waits for handlers that ignore the
// cancellation of their context.
const abandonAfter = time.Second

// Server serves requests on any number of listeners. Requests run on a
// bounded pool of long-lived workers (Options.Workers) fed by a bounded
// queue (Options.Queue). Overload is met with back-pressure, not errors:
// when the queue is full the server stops reading the connection whose
// request does not fit, so that TCP makes the client's writes wait, and
// reads it again when a place frees up. Only a limit set on purpose
// (Options.MaxConcurrent) answers status.ServerBusy.
//
// The queue is fair between connections: each connection has its own
// queue, and workers take requests from the connections in turn, one at
// a time, so a connection with a thousand requests queued delays another
// connection's request by at most one request per connection with
// requests waiting. A connection with nothing queued may always queue one
// request, even when the queue is full, so a flood on some connections
// never keeps the others out; paused connections get the places that
// free up in the order they paused.
type Server struct {
	h    Handler
	opts Options
	ts   *transport.Server

	ctx    context.Context
	cancel context.CancelFunc

	// direct hands a request to an idle worker when none is queued.
	direct  chan job
	workers atomic.Int32 // started and not stopped
	wg      sync.WaitGroup

	// held counts the requests queued or running (or read and waiting
	// for a place). It is raised under mu, after shutting is looked at
	// there, and lowered anywhere (done), so that the end of a request
	// run on its reader takes no lock.
	held atomic.Int64
	// shutting is set under mu; drained is closed (once: drainOnce) when
	// shutting is set and held reaches 0.
	shutting  atomic.Bool
	drained   chan struct{}
	drainOnce sync.Once

	mu sync.Mutex
	// queued counts the requests in the connections' queues; it changes
	// under mu, and is read without it where a stale value is harmless.
	queued  atomic.Int64
	ready   fifo[*connState] // connections with requests queued, in turn
	waiting fifo[*connState] // paused connections, in the order they paused
	idle    int              // workers waiting for a request and not handed one
	maxIdle int              // more idle workers than this stop at once
	conns   map[*transport.Conn]*connState

	busy      atomic.Uint64
	pauses    atomic.Uint64
	paused    atomic.Int32
	abandoned atomic.Uint64
	dropped   atomic.Uint64
	hbID      atomic.Uint64
	hbSent    atomic.Uint64
	hbWg      sync.WaitGroup
	stop      chan struct{}

	// runNear's watcher: nearRuns counts runs; the watcher parks when a
	// tick saw none, and the next run wakes it.
	nearRuns    atomic.Uint64
	watchParked atomic.Bool
	// nearList holds the connections that ran a request in runNear
	// lately, for the watcher to look at instead of every connection:
	// one that ran none for nearForget leaves it (see rescueSlow).
	nearMu    sync.Mutex
	nearList  []*connState
	watchWake chan struct{} // (1)
	watchStop chan struct{} // closed once no connection is read
	closeOnce sync.Once
	closed    chan struct{} // closed when the first close has finished
}

// connState is the server's view of one connection.
type connState struct {
	conn   *transport.Conn
	ctx    context.Context // cancelled when the connection closes
	cancel context.CancelFunc
	// paused is set while the connection's reader waits for a place in
	// the queue; resumed is when it last stopped waiting (clock).
	paused  atomic.Bool
	resumed atomic.Int64
	// inflight counts the requests read and not yet answered.
	inflight atomic.Int32

	// Under Server.mu:
	q       fifo[job] // the connection's queued requests, oldest first
	inReady bool      // in Server.ready
	pending job       // read, waiting for a place; the reader is paused
	waits   bool      // pending is set
	// inWaiting is set while the connection is in Server.waiting (once
	// at most: a connection whose paused request went in another way
	// keeps its place in line for its next pause).
	inWaiting bool
	queuedP   chan struct{} // (1) pending was queued for the paused reader

	// pooled: the goroutine reading the connection is one of the
	// server's (it called Resume), not the connection's own reader.
	// Only the goroutine reading touches it.
	pooled bool
	// unclaimed is not zero while the reader runs a request with the
	// connection detached and nobody reading it (runNear): it holds
	// that run's number (turn), so that a run whose role was claimed
	// cannot claim a later run's; nearSince is when the run's request
	// arrived (clock). The watcher (watchNear) claims the reading role of a run
	// older than nearGrace. turn is the reader's.
	unclaimed atomic.Uint64
	nearSince atomic.Int64
	turn      uint64
	listed    atomic.Bool // in Server.nearList
	// slow is set when the connection's last request run by its reader
	// (runNear, inline) took longer than nearQuick: then a request read
	// with more of the connection behind it goes to a worker
	// (leader/follower) instead of holding up the ones behind it.
	slow atomic.Bool

	// req is lent to the handler of one of the connection's requests at a
	// time (reqLent), so that a request costs no allocation of its
	// Request; the others get a new one.
	req     Request
	reqLent atomic.Bool
}

// A request may run on the goroutine that read it, with its connection
// unread, for nearGrace; the watcher looks every nearTick.
const (
	nearGrace = time.Millisecond
	nearTick  = time.Millisecond
	// While every run the watcher sees is younger than nearLinger, it
	// looks half as often each time, down to every nearTickMax: a
	// request that runs long then waits up to nearTickMax before
	// another goroutine reads its connection on, and a server with many
	// quick runs wakes its watcher 250 times a second instead of 1,000.
	nearLinger  = 250 * time.Microsecond
	nearTickMax = 4 * time.Millisecond
	// A connection that ran no request in runNear for nearForget leaves
	// the watcher's list.
	nearForget = 100 * time.Millisecond
)

// nearQuick is how long a request may take for the next requests of its
// connection, already read, to be run one after another on the
// goroutine that reads it, as raw TCP's server does, instead of each
// handing the reading on to a worker (a goroutine wake-up per request).
const nearQuick = 50 * time.Microsecond

// job is a request read and waiting for a worker, or (resume) a detached
// connection for an idle worker to read on.
type job struct {
	cs     *connState
	conn   *transport.Conn
	hdr    Header
	f      *transport.Buffer
	recv   time.Time // when it was read
	queued bool      // handed to a worker (Request.Queued)
	resume bool
	// quiet: when it was read, no other request of its connection was
	// in progress and no other had been read behind it.
	quiet bool
}

// NewServer returns a Server that answers requests with h; opts may be
// nil. It starts a goroutine that keeps heartbeats going and closes idle
// connections; Close stops it.
func NewServer(h Handler, opts *Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	s := &Server{
		h:       h,
		opts:    o,
		direct:  make(chan job, o.Workers),
		drained: make(chan struct{}),
		stop:    make(chan struct{}),
		closed:  make(chan struct{}),

		watchWake: make(chan struct{}, 1),
		watchStop: make(chan struct{}),
		conns:     map[*transport.Conn]*connState{},
		maxIdle:   max(minIdleWorkers, 2*runtime.GOMAXPROCS(0)),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	to := o.transport()
	to.PlainOnTLS = plainOnTLS // a consumer without TLS is told why
	s.ts = transport.NewServer(serverHandler{s}, to)
	s.hbWg.Go(s.keepalive)
	s.hbWg.Go(s.watchNear)
	return s, nil
}

// Serve accepts connections on l until Close or Shutdown, then returns
// ErrServerClosed. It closes l.
func (s *Server) Serve(l net.Listener) error { return s.ts.Serve(l) }

// Busy returns how many requests were answered status.ServerBusy because of
// Options.MaxConcurrent.
func (s *Server) Busy() uint64 { return s.busy.Load() }

// Refused returns how many connections were closed at once because
// Options.MaxConns were open.
func (s *Server) Refused() uint64 { return s.ts.Refused() }

// Throttled returns how many times the server stopped reading a
// connection because its memory budget (Options.MaxMemory) was used up.
func (s *Server) Throttled() uint64 { return s.ts.Throttled() }

// Reclaimed returns how many of the server's connections its memory
// budget closed to get memory back while others waited for it (see
// transport.Budget.Reclaimed).
func (s *Server) Reclaimed() uint64 { return s.ts.Reclaimed() }

// ThrottledByIP returns how many times the server stopped reading a
// connection because the requests in progress from its peer's IP address
// held Options.MaxMemoryPerIP.
func (s *Server) ThrottledByIP() uint64 { return s.ts.ThrottledByIP() }

// Budget returns the memory budget the server's connections are charged
// to: Options.Budget, or the server's own of Options.MaxMemory bytes.
// Its Used is what their frames hold now.
func (s *Server) Budget() *transport.Budget { return s.ts.Budget() }

// FailedHandshakes returns how many connections were closed because
// their TLS handshake failed (see transport.Server.FailedHandshakes).
func (s *Server) FailedHandshakes() uint64 { return s.ts.FailedHandshakes() }

// Conns returns how many connections are open.
func (s *Server) Conns() int { return len(s.ts.Conns()) }

// Workers returns how many workers are running now (busy or idle).
func (s *Server) Workers() int { return int(s.workers.Load()) }

// Pauses returns how many times a connection's reading was paused because
// the queue was full.
func (s *Server) Pauses() uint64 { return s.pauses.Load() }

// Paused returns how many connections are paused now.
func (s *Server) Paused() int { return int(s.paused.Load()) }

// KeepAlives returns how many heartbeats the server sent on paused
// connections.
func (s *Server) KeepAlives() uint64 { return s.hbSent.Load() }

// Held returns how many requests the server holds now, queued or running.
func (s *Server) Held() int { return int(s.held.Load()) }

// Abandoned returns how many requests the server gave up on when it
// closed: queued ones never run, and running ones whose handler had not
// returned (it goes on in the background, and its answer is dropped).
func (s *Server) Abandoned() uint64 { return s.abandoned.Load() }

// Dropped returns how many queued requests the server dropped, not run,
// because their connection closed before a worker took them (two-way
// requests only: their callers had been told the connection was lost).
func (s *Server) Dropped() uint64 { return s.dropped.Load() }

// Shutdown stops the server gracefully: it stops accepting, tells every
// connected client that it is shutting down (clients then send no new
// calls; requests that still arrive are answered status.ReadOnly, not
// executed), waits until the requests it holds end or ctx is done, and
// closes. When ctx ends first it returns by then all the same: it cancels
// the requests' contexts, closes the connections without waiting, counts
// and logs the requests it abandoned, and returns an error wrapping
// ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting.Store(true)
	s.mu.Unlock()
	// A request that ended before the store did not see it.
	if s.held.Load() == 0 {
		s.drainOnce.Do(func() { close(s.drained) })
	}
	s.ts.StopAccepting()
	for _, conn := range s.ts.Conns() {
		f := NewFrame()
		f.B = append(f.B, readOnlyEvent...)
		h := Header{Request: true, Event: true, Length: uint32(len(readOnlyEvent))}
		h.Put(f.B)
		_ = conn.Send(f)
	}
	select {
	case <-s.drained:
		s.close(true, abandonAfter)
		return nil
	case <-ctx.Done():
	}
	n := s.close(false, 0)
	if n > 0 {
		return fmt.Errorf("exchange: shutdown: %w; abandoned %d requests", ctx.Err(), n)
	}
	return fmt.Errorf("exchange: shutdown: %w", ctx.Err())
}

// Close closes every connection and listener, cancels the context of the
// requests in progress and waits for their handlers, for at most a second:
// a handler that ignores its context is abandoned (counted by Abandoned
// and logged). It is idempotent.
func (s *Server) Close() error {
	s.close(true, abandonAfter)
	return nil
}

// close stops the server once; later calls wait for the first. graceful
// writes what is queued on each connection (for at most a second); wait
// bounds the wait for running handlers. It returns how many requests it
// abandoned.
func (s *Server) close(graceful bool, wait time.Duration) uint64 {
	first := false
	s.closeOnce.Do(func() { first = true })
	if !first {
		<-s.closed
		return 0
	}
	defer close(s.closed)
	close(s.stop)
	s.cancel()
	// Workers stop now, but readers still run until their connections
	// close: what they hand to workers, take here meanwhile. A detached
	// connection must be read on for its goroutines to end.
	queued := 0
	stopDrain := make(chan struct{})
	var drain sync.WaitGroup
	drain.Go(func() {
		for {
			select {
			case j := <-s.direct:
				if j.resume {
					go j.conn.Resume()
					continue
				}
				j.f.Release()
				s.done()
				queued++
			case <-stopDrain:
				return
			}
		}
	})
	if graceful {
		s.ts.Close()
	} else {
		s.ts.CloseNow()
	}
	close(stopDrain)
	drain.Wait()
	close(s.watchStop)
	// No reader runs now: drop what is still queued.
	s.mu.Lock()
	for {
		j, ok := s.next()
		if !ok {
			break
		}
		j.f.Release()
		s.done()
		queued++
	}
	s.mu.Unlock()
	for drained := false; !drained; {
		select {
		case j := <-s.direct:
			if j.resume {
				continue // cannot be: its connection is closed
			}
			j.f.Release()
			s.done()
			queued++
		default:
			drained = true
		}
	}
	s.hbWg.Wait()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	} else {
		select {
		case <-done:
		default:
		}
	}
	running := s.Held()
	n := uint64(queued + running)
	if n > 0 {
		s.abandoned.Add(n)
		s.opts.Logger.Warn("server closed with requests unfinished; abandoned them",
			zap.Int("queued", queued), zap.Int("running", running))
	}
	return n
}

// keepalive sends a heartbeat every heartbeat interval on every paused
// connection (Queue full, or waiting for room in the memory budget:
// Options.MaxMemory), so that its client, whose requests wait unread, still hears
// from the server and does not take it as dead, and it closes connections
// that sent nothing, not even a heartbeat, for IdleTimeout while they
// were being read.
func (s *Server) keepalive() {
	hb, idleMax := s.opts.Heartbeat, s.opts.IdleTimeout
	tick := min(hb, idleMax/2)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastHB := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			sendHB := now.Sub(lastHB) >= hb-tick/2
			if sendHB {
				lastHB = now
			}
			for _, conn := range s.ts.Conns() {
				cs := s.state(conn)
				if cs != nil && cs.paused.Load() || conn.Throttled() {
					if !sendHB {
						continue
					}
					f := NewFrame()
					h := Header{Request: true, TwoWay: true, Event: true, ID: s.hbID.Add(1)}
					h.Put(f.B)
					if conn.Send(f) == nil {
						s.hbSent.Add(1)
					}
					continue
				}
				last := conn.LastRead()
				if cs != nil {
					if r := epoch.Add(time.Duration(cs.resumed.Load())); r.After(last) {
						last = r
					}
				}
				if idle := now.Sub(last); idle >= idleMax {
					s.opts.Logger.Debug("closing idle connection", zap.Stringer("peer", conn.RemoteAddr()), zap.Duration("idle", idle))
					conn.Abort(fmt.Errorf("%w: %s idle for %v", status.ErrConnLost, conn.RemoteAddr(), idle))
				}
			}
		}
	}
}

func (s *Server) state(conn *transport.Conn) *connState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[conn]
}

// done ends one request counted in held, with or without s.mu held.
// Serve raises held under s.mu only after it saw shutting unset there,
// and Shutdown sets shutting before it looks at held: whichever of a
// request's end and Shutdown comes last sees the other and closes
// drained.
func (s *Server) done() {
	if s.held.Add(-1) == 0 && s.shutting.Load() {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

type serverHandler struct{ s *Server }

// Serve runs on the connection's reader. When nothing is queued it runs
// the request itself: with the connection unread when no more of it has
// arrived or the connection's last request was quick (runNear; the
// watcher has another goroutine read on if the request takes long), else
// handing the reading to an idle worker first (inline). Otherwise it
// queues the request for a worker, waiting for a place when the queue is
// full: while it waits the connection is not read.
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
	if s.shutting.Load() {
		s.mu.Unlock()
		f.Release()
		if hdr.TwoWay {
			s.reply(conn, hdr, nil, status.ErrReadOnly, false)
		}
		return
	}
	if m := s.opts.MaxConcurrent; m > 0 && s.held.Load() >= int64(m) {
		s.mu.Unlock()
		f.Release()
		s.busy.Add(1)
		if hdr.TwoWay {
			s.reply(conn, hdr, nil, fmt.Errorf("%w: %d requests in progress (limit)", status.ErrServerBusy, m), false)
		}
		return
	}
	s.held.Add(1)
	cs, ok := s.conns[conn]
	if !ok {
		cs = &connState{conn: conn}
		cs.ctx, cs.cancel = context.WithCancel(s.ctx)
		s.conns[conn] = cs
	}
	quiet := cs.inflight.Add(1) == 1 && conn.Buffered() == 0
	j := job{cs: cs, conn: conn, hdr: hdr, f: f, recv: Now(), quiet: quiet}
	// A connection with nothing queued may always queue one request.
	if cs.q.len() > 0 && s.queued.Load() >= int64(s.opts.Queue) {
		j.queued = true
		s.wait(cs, conn, j)
		return
	}
	if s.queued.Load() == 0 {
		if (conn.Buffered() == 0 || !cs.slow.Load()) && s.reserve() {
			// Nothing more to read yet, or the connection's requests
			// are quick: run the request here and read on after it,
			// like a server without workers, unless it takes long.
			s.mu.Unlock()
			s.runNear(cs, j)
			return
		}
		if s.idle > 0 {
			// Leader/follower: an idle worker takes over reading the
			// connection and this goroutine runs the request, with no
			// hand-off between reading it and answering it.
			s.idle--
			s.mu.Unlock()
			s.inline(cs, j)
			return
		}
	}
	j.queued = true
	s.enqueue(cs, j)
	spawn := s.queued.Load() > 0 // no worker was idle
	s.mu.Unlock()
	if spawn {
		s.spawn()
	}
}

// inline runs j on the goroutine that read it, which holds the reading
// role of j's connection: it hands the role to the idle worker reserved
// for it (s.idle was taken), runs j in that worker's place, and then works
// on as a worker, in the loop of work if it came from there (Resume), here
// otherwise (it is the connection's own reader, whose loop then ends).
func (s *Server) inline(cs *connState, j job) {
	pooled := cs.pooled
	if !pooled {
		// Counted while this goroutine still reads the connection: once
		// it has handed the reading on, Close may be waiting for s.wg.
		s.wg.Add(1)
		defer s.wg.Done()
	}
	cs.pooled = true // the worker that reads on
	j.conn.Detach()
	s.direct <- job{conn: j.conn, resume: true} // never blocks, as in enqueue
	if pooled {
		s.runTimed(j) // work counts it out of held when Resume returns
		return
	}
	s.runTimed(j)
	s.workLoop(true)
}

// runTimed is run for a request its reader ran (runNear, inline): it
// records whether it was quick, for the connection's next requests.
func (s *Server) runTimed(j job) {
	s.run(j)
	j.cs.slow.Store(time.Since(j.recv) > nearQuick)
}

// answerTimed is runTimed that returns the response frame (nil for a
// one-way request) instead of sending it, and whether it was lone.
func (s *Server) answerTimed(j job) (*transport.Buffer, bool) {
	out, lone := s.answer(j)
	j.cs.slow.Store(time.Since(j.recv) > nearQuick)
	return out, lone
}

// reserve takes a worker's place for a request run inline without a
// worker taking over, and reports false when the pool is full.
func (s *Server) reserve() bool { return s.rejoin() }

// runNear runs j on the goroutine that read it, whose place in the pool
// reserve took, while nobody reads j's connection: when j is done within
// nearGrace this goroutine reads on, and the request cost no hand-off and
// no wake-up at all. When it takes longer, the watcher has another
// goroutine read on, and this one becomes a worker as in inline.
func (s *Server) runNear(cs *connState, j job) {
	pooled := cs.pooled
	if !pooled {
		// Counted while this goroutine still reads the connection, as in
		// inline: once the watcher has another read on, Close may be
		// waiting for s.wg.
		s.wg.Add(1)
		defer s.wg.Done()
	}
	cs.turn++
	turn := cs.turn
	j.conn.Detach()
	cs.nearSince.Store(int64(j.recv.Sub(epoch)))
	cs.unclaimed.Store(turn)
	if !cs.listed.Load() {
		s.listNear(cs)
	}
	s.nearRuns.Add(1)
	if s.watchParked.Load() && s.watchParked.CompareAndSwap(true, false) {
		s.watchWake <- struct{}{} // never blocks: one wake per park
	}
	out, lone := s.answerTimed(j)
	if cs.unclaimed.CompareAndSwap(turn, 0) {
		j.conn.Reattach()
		if out != nil {
			// This goroutine reads on: the response leaves with the
			// others of its read, written by it before it waits for the
			// network, not handed to the connection's writer.
			_ = j.conn.SendLater(out)
		}
		// Give the place back, and start a worker if requests were
		// queued while this goroutine held it (their reader could not):
		// their reader raised queued before it looked at workers, this
		// lowers workers before it looks at queued, so one of the two
		// starts the worker. No lock.
		s.workers.Add(-1)
		s.done()
		if s.queued.Load() > 0 {
			s.spawn()
		}
		return
	}
	// Rescued: this goroutine keeps the place it reserved, as a worker.
	if out != nil {
		s.send(j.conn, out, lone)
	}
	if pooled {
		return // work counts j out of held when Resume returns
	}
	s.workLoop(true)
}

// watchNear looks every nearTick for requests run by runNear for longer
// than nearGrace, and has a new goroutine read their connections on. It
// parks when a tick saw no run, until the next run. It runs until no
// connection is read any more (watchStop), so that a request that never
// ends cannot keep Close from closing its connection.
func (s *Server) watchNear() {
	t := time.NewTimer(nearTick)
	defer t.Stop()
	last := s.nearRuns.Load()
	tick := nearTick
	for {
		select {
		case <-t.C:
		case <-s.watchStop:
			return
		}
		busy, lingering := s.rescueSlow()
		// While the runs it sees are young, the watcher looks less
		// often (each look is a timer firing, a wake-up of a thread).
		if lingering {
			tick = nearTick
		} else {
			tick = min(2*tick, nearTickMax)
		}
		if !busy && s.nearRuns.Load() == last {
			s.watchParked.Store(true)
			// A run that started before the store did not see it.
			if s.nearRuns.Load() == last || !s.watchParked.CompareAndSwap(true, false) {
				select {
				case <-s.watchWake:
				case <-s.watchStop:
					return
				}
				tick = nearTick
			}
		}
		last = s.nearRuns.Load()
		t.Reset(tick)
	}
}

// listNear puts cs in the watcher's list, after its unclaimed was set.
func (s *Server) listNear(cs *connState) {
	s.nearMu.Lock()
	if cs.listed.CompareAndSwap(false, true) {
		s.nearList = append(s.nearList, cs)
	}
	s.nearMu.Unlock()
}

// rescueSlow claims the reading role of the connections whose runNear
// request is older than nearGrace (of any age once the server stops), and
// reports whether a runNear request was running, and whether one had run
// for nearLinger or longer (lingering). It looks only at the
// connections in nearList, not at every connection, and not under s.mu,
// which every request takes: with a thousand connections it used to hold
// s.mu for the whole walk every millisecond.
//
// A connection leaves the list when it ran nothing for nearForget. Its
// listed flag is cleared first and unclaimed looked at after: a runNear
// that set unclaimed before that look keeps it listed, and one that set
// it after sees listed cleared and lists it again (listNear waits for
// nearMu, held here), so no run goes unwatched.
func (s *Server) rescueSlow() (busy, lingering bool) {
	now := clock()
	stopping := false
	select {
	case <-s.stop:
		stopping = true
	default:
	}
	var slow []*connState
	s.nearMu.Lock()
	list := s.nearList
	for i := 0; i < len(list); {
		cs := list[i]
		if cs.unclaimed.Load() == 0 {
			if now-cs.nearSince.Load() < int64(nearForget) {
				i++
				continue
			}
			cs.listed.Store(false)
			if cs.unclaimed.Load() == 0 {
				last := len(list) - 1
				list[i], list[last] = list[last], nil
				list = list[:last]
				continue
			}
			cs.listed.Store(true) // a run started just now
		}
		busy = true
		age := now - cs.nearSince.Load()
		if age >= int64(nearLinger) {
			lingering = true
			// Responses its reader queued (SendLater) before this run
			// would wait for it: the writer sends them.
			cs.conn.Kick()
		}
		if stopping || age >= int64(nearGrace) {
			slow = append(slow, cs)
		}
		i++
	}
	s.nearList = list
	s.nearMu.Unlock()
	for _, cs := range slow {
		turn := cs.unclaimed.Load()
		if turn == 0 || !cs.unclaimed.CompareAndSwap(turn, 0) {
			continue // done just now
		}
		go func() {
			cs.pooled = false
			cs.conn.Resume()
		}()
	}
	return busy, lingering
}

// enqueue queues j on its connection, or hands it to an idle worker when
// one waits (then nothing is queued). s.mu is held.
func (s *Server) enqueue(cs *connState, j job) {
	if s.idle > 0 && s.queued.Load() == 0 {
		s.idle--
		s.direct <- j // never blocks: it has room for every worker
		return
	}
	cs.q.push(j)
	s.queued.Add(1)
	if !cs.inReady {
		cs.inReady = true
		s.ready.push(cs)
	}
	// An idle worker while requests are queued: hand it the next one.
	for s.idle > 0 && s.queued.Load() > 0 {
		n, _ := s.next()
		s.idle--
		s.direct <- n
	}
}

// next takes the request whose turn it is: the oldest of the connection
// whose turn it is, which then goes to the back of the line if it has
// more. A place freed in the queue goes to a paused connection. s.mu is
// held.
func (s *Server) next() (job, bool) {
	for s.ready.len() > 0 {
		cs := s.ready.pop()
		if cs.q.len() == 0 {
			cs.inReady = false
			continue
		}
		j := cs.q.pop()
		s.queued.Add(-1)
		if cs.q.len() > 0 {
			s.ready.push(cs)
		} else {
			cs.inReady = false
			if cs.waits {
				// Its queue is empty: its paused request may go in
				// now, whatever the other connections hold.
				s.admit(cs)
			}
		}
		for s.waiting.len() > 0 && s.queued.Load() < int64(s.opts.Queue) {
			w := s.waiting.pop()
			w.inWaiting = false
			if w.waits {
				s.admit(w)
			}
		}
		return j, true
	}
	return job{}, false
}

// admit queues the request cs's paused reader holds and lets the reader
// go on. s.mu is held.
func (s *Server) admit(cs *connState) {
	j := cs.pending
	cs.pending, cs.waits = job{}, false
	s.enqueue(cs, j)
	cs.queuedP <- struct{}{}
}

// wait holds j until a place in the queue is free, with the connection
// paused meanwhile; when the connection or the server closes first, j is
// dropped. s.mu is held on entry and released.
func (s *Server) wait(cs *connState, conn *transport.Conn, j job) {
	cs.pending, cs.waits = j, true
	if cs.queuedP == nil {
		cs.queuedP = make(chan struct{}, 1)
	}
	if !cs.inWaiting {
		cs.inWaiting = true
		s.waiting.push(cs)
	}
	s.mu.Unlock()
	s.spawn() // the queue is full: make sure the pool is at full strength
	// This reader waits now, not for the network: what it queued with
	// SendLater goes to the writer.
	conn.Kick()
	cs.paused.Store(true)
	s.paused.Add(1)
	s.pauses.Add(1)
	defer func() {
		cs.resumed.Store(clock())
		cs.paused.Store(false)
		s.paused.Add(-1)
	}()
	select {
	case <-cs.queuedP:
		return
	case <-conn.Done():
	case <-s.stop:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !cs.waits {
		<-cs.queuedP // queued just now, after all
		return
	}
	cs.pending, cs.waits = job{}, false
	j.f.Release()
	s.done()
}

// spawn starts a worker unless the pool is full.
func (s *Server) spawn() {
	for {
		n := s.workers.Load()
		if int(n) >= s.opts.Workers {
			return
		}
		if s.workers.CompareAndSwap(n, n+1) {
			s.wg.Go(s.work)
			return
		}
	}
}

// minIdleWorkers is the floor of Server.maxIdle, the most idle workers a
// Server keeps (2 per P when that is more): a worker that finds that many
// idle stops instead of waiting.
const minIdleWorkers = 16

// work runs requests until the server stops or it has been idle for
// WorkerIdle.
func (s *Server) work() { s.workLoop(false) }

// workLoop is work for a worker whose last request (when finished) is
// still counted in held.
func (s *Server) workLoop(finished bool) {
	idle := time.NewTimer(s.opts.WorkerIdle)
	defer idle.Stop()
	for {
		select {
		case <-s.stop:
			s.exit(finished)
			return
		default:
		}
		s.mu.Lock()
		if finished {
			s.done()
			finished = false
		}
		j, ok := s.next()
		if !ok {
			if s.idle >= s.maxIdle {
				// Enough workers wait already: this one stops now, not
				// after WorkerIdle. Workers that took over a reader's
				// place (inline, runs the watcher handed on) would pile
				// up otherwise, and every GC cycle scans each one's
				// stack.
				s.workers.Add(-1)
				s.mu.Unlock()
				return
			}
			s.idle++
		}
		s.mu.Unlock()
		if !ok {
			select {
			case j = <-s.direct:
			case <-idle.C:
				s.mu.Lock()
				if s.idle > 0 {
					// Nobody counts on this worker: it stops.
					s.idle--
					s.workers.Add(-1)
					s.mu.Unlock()
					return
				}
				// A request is on its way to an idle worker, and this
				// may be the last one: take it.
				s.mu.Unlock()
				j = <-s.direct
			case <-s.stop:
				s.workers.Add(-1)
				return
			}
		}
		if j.resume {
			// This worker reads the connection now, until it runs a
			// request (inline: then it is a worker again) or the
			// connection ends.
			if j.conn.Resume() {
				finished = true // it ran one request, in inline
			} else if !s.rejoin() {
				return
			}
			idle.Reset(s.opts.WorkerIdle)
			continue
		}
		s.run(j)
		finished = true
		idle.Reset(s.opts.WorkerIdle)
	}
}

// rejoin puts a worker whose connection ended while it read it back into
// the pool, and reports false when the pool is full (it then stops). A
// worker that reads is not counted in workers: it took the place of the
// reader that ran a request inline.
func (s *Server) rejoin() bool {
	for {
		n := s.workers.Load()
		if int(n) >= s.opts.Workers {
			return false
		}
		if s.workers.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// exit stops a worker; finished says its last request is still counted.
func (s *Server) exit(finished bool) {
	if finished {
		s.done()
	}
	s.workers.Add(-1)
}

// Closed cancels the context of the connection's requests in progress
// and drops its queued two-way requests.
func (h serverHandler) Closed(conn *transport.Conn, _ error) {
	s := h.s
	s.mu.Lock()
	cs, ok := s.conns[conn]
	delete(s.conns, conn)
	dropped := 0
	select {
	case <-s.stop:
		// The server is closing: close drops and counts what is queued.
	default:
		if ok {
			dropped = s.dropQueued(cs)
		}
	}
	s.mu.Unlock()
	if ok {
		cs.cancel()
	}
	s.dropped.Add(uint64(dropped))
}

// dropQueued removes the two-way requests queued on a closed connection:
// their callers were told the connection was lost, so an answer would
// reach nobody, and a caller that retried elsewhere would see its call
// run twice. One-way requests stay queued. s.mu is held.
func (s *Server) dropQueued(cs *connState) int {
	dropped := 0
	for range cs.q.len() {
		j := cs.q.pop()
		if !j.hdr.TwoWay {
			cs.q.push(j)
			continue
		}
		j.f.Release()
		s.queued.Add(-1)
		s.done()
		dropped++
	}
	return dropped
}

// run handles one request and answers it; the caller counts it out of
// held.
func (s *Server) run(j job) {
	if out, lone := s.answer(j); out != nil {
		s.send(j.conn, out, lone)
	}
}

// answer handles one request and returns its response frame, nil for a
// one-way request, and whether the request was lone (see reply).
func (s *Server) answer(j job) (*transport.Buffer, bool) {
	resp, keep, err := s.handle(j)
	holds := keep && resp != nil && resp.Spliced()
	if holds {
		// The response may send bytes of the request itself (a
		// borrowed argument returned as the reply: Request.KeepBody):
		// the request's frame goes back to the pool with the
		// response, once that has been written or dropped.
		resp.Hold(j.f)
	} else {
		j.f.Release()
	}
	if testHookAnswered != nil {
		testHookAnswered(j.hdr, holds)
	}
	lone := j.cs.inflight.Add(-1) == 0 && j.quiet
	if !j.hdr.TwoWay {
		if resp != nil {
			resp.Release()
		}
		return nil, false
	}
	return s.response(j.hdr, resp, err), lone
}

// testHookAnswered, when set (by tests only), runs in answer once a
// request's frame is released or held by its response (holds), before
// the response is sent.
var testHookAnswered func(h Header, holds bool)

// handle runs the handler for j; keep is the handler's Request.KeepBody.
func (s *Server) handle(j job) (resp *transport.Buffer, keep bool, err error) {
	cs := j.cs
	req, lent := &cs.req, cs.reqLent.CompareAndSwap(false, true)
	if !lent {
		req = new(Request)
	}
	defer func() {
		if lent {
			cs.req = Request{}
			cs.reqLent.Store(false)
		}
		if r := recover(); r != nil {
			// The last resort, for a panic of the handler's own code (the
			// protocol's decoding, a serializer): a method's panic was
			// recovered below, once. The value stays here: the caller gets
			// an id to look up.
			var b [8]byte
			_, _ = rand.Read(b[:])
			id := hex.EncodeToString(b[:])
			s.opts.Logger.Error("handler panicked", zap.String("incident", id), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			resp, keep, err = nil, false, fmt.Errorf("%w: the provider failed (incident %s: see the provider's log)", status.ErrServerError, id)
		}
	}()
	*req = Request{Header: j.hdr, Body: Body(j.f), RemoteAddr: j.conn.RemoteAddr(), Received: j.recv, Queued: j.queued}
	resp, err = s.h.Handle(cs.ctx, req)
	return resp, req.KeepBody, err
}

// reply sends the response to req: resp with an OK status, or err's status
// and message. A response over the payload limit is replaced by a
// status.PayloadTooLarge answer.
//
// lone says no other request of the connection is in progress: the
// response is then written at once from the calling goroutine if the
// connection's writer is idle (transport's SendNow), with no hand-off to
// it; responses that come in numbers are left to the writer, which sends
// them together.
func (s *Server) reply(conn *transport.Conn, req Header, resp *transport.Buffer, err error, lone bool) {
	s.send(conn, s.response(req, resp, err), lone)
}

// send sends a response frame; lone: see reply.
func (s *Server) send(conn *transport.Conn, f *transport.Buffer, lone bool) {
	if lone {
		_ = conn.SendNow(f)
		return
	}
	_ = conn.Send(f)
}

// response is the frame answering req: resp with an OK status, or err's
// status and message (see reply).
func (s *Server) response(req Header, resp *transport.Buffer, err error) *transport.Buffer {
	if err == nil && resp == nil {
		resp = NewFrame()
	}
	if err == nil {
		if n := resp.Len() - HeaderSize; n > s.opts.MaxPayload {
			resp.Release()
			resp = nil
			err = fmt.Errorf("%w: response of %d bytes, limit %d", status.ErrPayloadTooLarge, n, s.opts.MaxPayload)
		}
	}
	code := status.CodeOf(err)
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
	h := Header{Serializer: req.Serializer, Status: code, ID: req.ID, Length: uint32(resp.Len() - HeaderSize)}
	h.Put(resp.B)
	return resp
}

// fifo is a first-in first-out queue on a ring buffer; its zero value is
// empty.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (f *fifo[T]) len() int { return f.n }

func (f *fifo[T]) push(v T) {
	if f.n == len(f.buf) {
		buf := make([]T, max(4, 2*len(f.buf)))
		for i := range f.n {
			buf[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = buf, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = v
	f.n++
}

func (f *fifo[T]) pop() T {
	var zero T
	v := f.buf[f.head]
	f.buf[f.head] = zero
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	if f.n == 0 && len(f.buf) > 64 {
		f.buf, f.head = nil, 0 // a burst is over: give its memory back
	}
	return v
}
