package dubbo

import (
	"cmp"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
	"github.com/minidubbo/minidubbo/transport"
)

// unexportWait bounds how long Unexport of a port's last service waits for
// the calls in progress.
const unexportWait = 10 * time.Second

// exported is one service served on a port.
type exported struct {
	inv      protocol.Invoker
	typer    protocol.ArgTyper         // nil: arguments decode as plain values
	observer protocol.ResponseObserver // nil: nobody counts response bytes
	token    []byte                    // required token attachment; nil: none
	serID    byte                      // the serialization the service was exported with
	names    []string                  // what its requests' heads carry, for the interner
	id       serviceID                 // its interface, version and group
}

// serviceID finds an exported service from a request's head without
// building its key string (group/interface:version), which a versioned
// service would allocate on every call.
type serviceID struct{ service, version, group string }

// key is the service key of id, as protocol.ServiceKey.
func (id serviceID) key() string { return protocol.ServiceKey(id.service, id.version, id.group) }

// server serves the services exported on one port.
type server struct {
	p    *Protocol
	tls  *tls.Config // as given to ExportTLS (nil: Options.ServerTLS)
	keys []string    // the real host:port
	port int         // the real port
	es   *exchange.Server
	done chan struct{} // closed when Serve returns

	mu       sync.Mutex // writers of services
	services atomic.Pointer[map[string]*exported]
	byID     atomic.Pointer[map[serviceID]*exported] // services by their IDs
	names    *interner                               // the strings of the services' request heads
}

// argTyperOf finds the ArgTyper at the end of a chain of wrappers that have
// an Unwrap method (like protocol.Chain's).
func argTyperOf(inv protocol.Invoker) protocol.ArgTyper {
	for range 64 {
		if t, ok := inv.(protocol.ArgTyper); ok {
			return t
		}
		u, ok := inv.(interface{ Unwrap() protocol.Invoker })
		if !ok {
			return nil
		}
		inv = u.Unwrap()
	}
	return nil
}

func (p *Protocol) listen(host string, port int, given, cfg *tls.Config) (*server, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := transport.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("dubbo: export: %w", err)
	}
	s := &server{p: p, tls: given, port: l.Addr().(*net.TCPAddr).Port, done: make(chan struct{}), names: newInterner()}
	// Only the real address names the server: port 0 asks for a free port
	// of its own, so a later export with port 0 gets another one.
	s.keys = []string{net.JoinHostPort(host, strconv.Itoa(s.port))}
	s.services.Store(&map[string]*exported{})
	s.byID.Store(&map[serviceID]*exported{})
	s.es, err = exchange.NewServer(s, &exchange.Options{
		MaxPayload:     p.opts.MaxPayload,
		Heartbeat:      p.opts.Heartbeat,
		IdleTimeout:    p.opts.IdleTimeout,
		MaxConcurrent:  p.opts.MaxConcurrent,
		Workers:        p.opts.Workers,
		Queue:          p.opts.Queue,
		TLS:            cfg,
		MaxConns:       p.opts.MaxConnections,
		FrameTimeout:   p.opts.FrameTimeout,
		MaxQueue:       p.opts.MaxQueue,
		MaxMemoryPerIP: p.opts.MaxMemoryPerIP,
		Budget:         p.budget,
		Logger:         p.opts.Logger.Named("dubbo.server"),
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	go func() {
		defer close(s.done)
		_ = s.es.Serve(l)
	}()
	return s, nil
}

// add serves e under key; it is an error if key is served already.
func (s *server) add(key string, e *exported) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.services.Load()
	if _, ok := old[key]; ok {
		return fmt.Errorf("dubbo: export: %s is already exported on port %d", key, s.port)
	}
	m := make(map[string]*exported, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = e
	s.store(m)
	return nil
}

// store publishes the services m. s.mu is held.
func (s *server) store(m map[string]*exported) {
	byID := make(map[serviceID]*exported, len(m))
	for _, e := range m {
		byID[e.id] = e
	}
	s.services.Store(&m)
	s.byID.Store(&byID)
	s.names.set(m)
}

// remove stops serving key and reports how many services are left.
func (s *server) remove(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.services.Load()
	m := make(map[string]*exported, len(old))
	for k, v := range old {
		if k != key {
			m[k] = v
		}
	}
	s.store(m)
	return len(m)
}

func (s *server) shutdown(ctx context.Context) error {
	err := s.es.Shutdown(ctx)
	<-s.done
	s.p.abandoned.Add(s.es.Abandoned())
	return err
}

func (s *server) close() {
	s.es.Close()
	<-s.done
	s.p.abandoned.Add(s.es.Abandoned())
}

// Handle implements exchange.Handler: it decodes a request, calls the
// service and encodes the outcome.
func (s *server) Handle(ctx context.Context, req *exchange.Request) (*transport.Buffer, error) {
	st := &s.p.stats
	ser, err := s.p.opts.Serializers.ByID(req.Serializer)
	if err != nil {
		st.badSerializations.Add(1)
		return nil, fmt.Errorf("%w: dubbo: %w", status.ErrBadRequest, err)
	}
	dec, err := ser.NewDecoder(req.Body)
	if err != nil {
		st.badBodies.Add(1)
		return nil, fmt.Errorf("%w: dubbo: %w", status.ErrBadRequest, err)
	}
	defer dec.Release()
	r, err := decodeRequestHead(dec, s.p.opts.Attachments, s.names)
	if err != nil {
		if errors.Is(err, serialize.ErrLimit) && r.method != "" {
			st.badAttachments.Add(1)
		} else {
			st.badBodies.Add(1)
		}
		return nil, err
	}
	id := serviceID{r.service, r.version, r.group}
	e := (*s.byID.Load())[id]
	if e == nil {
		return nil, s.noService(id)
	}
	if req.Serializer != e.serID {
		st.badSerializations.Add(1)
		return nil, fmt.Errorf("%w: dubbo: %s is exported with serialization %s, the request uses %s",
			status.ErrBadRequest, id.key(), s.serName(e.serID), ser.Name())
	}
	// The token is checked before any argument is decoded, for every
	// method, service.EchoMethod included: the protocol answers $echo itself
	// (below, without running any filter or the service), and it is answered
	// nowhere else.
	if e.token != nil && subtle.ConstantTimeCompare([]byte(r.atts[protocol.KeyToken]), e.token) != 1 {
		st.badTokens.Add(1)
		what := "wrong"
		if _, ok := r.atts[protocol.KeyToken]; !ok {
			what = "missing"
		}
		return nil, fmt.Errorf("%w: dubbo: invalid token: %s token for %s.%s", status.ErrBadRequest, what, id.key(), r.method)
	}
	// A request whose time ran out while it waited for a worker is not
	// run: its consumer has given up (and may have retried it elsewhere).
	// It is answered a timeout, like Dubbo's timeout countdown does. One
	// run at once by the goroutine that read it did not wait: no clock
	// reading for it.
	deadline := callDeadline(req.Received, &r, s.p.opts.MaxProviderTimeout)
	if req.Queued {
		if now := exchange.Now(); !now.Before(deadline) {
			st.expired.Add(1)
			return nil, &status.Error{Code: status.ServerTimeout,
				Message: fmt.Sprintf("dubbo: %s.%s: not run: its time ran out while it waited %v in the provider's queue",
					id.key(), r.method, now.Sub(req.Received).Round(time.Millisecond))}
		}
	}
	var types []reflect.Type
	typed := false
	switch {
	case r.method == service.EchoMethod:
		types, typed = echoTypes, true
	case e.typer != nil:
		var ok bool
		if types, ok = e.typer.ArgTypes(r.method); !ok {
			return nil, noMethod(id, r.method, e.inv)
		}
		typed = true
	}
	c := new(call)
	args, err := decodeArgs(dec, &r, types, typed, &c.args)
	if err != nil {
		st.badBodies.Add(1)
		return nil, err
	}
	// Only a method that borrowed bytes of the request may answer with
	// them: then the request's frame waits for the response's write.
	// Otherwise it goes back to its pool as soon as Handle returns.
	req.KeepBody = r.borrowed
	if r.method == service.EchoMethod {
		return encodeResponse(ser, &protocol.Result{Value: args[0]}, nil)
	}
	cctx := &c.ctx
	cctx.init(ctx, deadline)
	defer cctx.release()
	ctx = cctx
	inv := &c.inv
	*inv = protocol.Invocation{Service: r.service, Version: r.version, Group: r.group, Method: r.method, Args: args, Attachments: r.atts,
		RemoteAddr: req.RemoteAddr, RequestBytes: len(req.Body)}
	res, err := s.invoke(ctx, e.inv, inv)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The method gave up because the call's time ran out: that is a
		// timeout the consumer can retry, not a business error.
		err = &status.Error{Code: status.ServerTimeout,
			Message: fmt.Sprintf("dubbo: %s.%s: %s on the provider", r.service, r.method, err), Cause: err}
	}
	if err != nil && isStatusError(err) {
		return nil, err
	}
	resp, err := encodeResponse(ser, res, err)
	if err == nil && e.observer != nil {
		e.observer.ResponseSent(inv, exchange.BodyLen(resp))
	}
	return resp, err
}

// noMethod is the error of a call to a method the service does not have:
// with the nearest name and the service's methods, which its registry URL
// publishes too (the caller named the service right, and passed its
// token if it has one).
func noMethod(id serviceID, method string, inv protocol.Invoker) error {
	methods := slices.Sorted(slices.Values(methodsOf(inv)))
	if len(methods) == 0 {
		return fmt.Errorf("%w: dubbo: service %s has no method %q", status.ErrServiceNotFound, id.key(), method)
	}
	return fmt.Errorf("%w: dubbo: service %s has no method %q%s (it has: %s)", status.ErrServiceNotFound,
		id.key(), method, named.DidYouMean(method, methods), strings.Join(methods, ", "))
}

// mostVariants is how many versions and groups of one interface a "no
// service" answer names.
const mostVariants = 5

// noService is the answer to a request for id, which the port does not
// serve. It names the versions and groups the port serves id's interface
// with (the nearest to id's first, at most mostVariants), so a caller that
// gave them wrong reads the right ones however it found the port (by a
// registry or by address). It names no other interface: a stranger probing
// the port learns only about the interface it named.
func (s *server) noService(id serviceID) error {
	var same []serviceID
	for sid := range *s.byID.Load() {
		if sid.service == id.service {
			same = append(same, sid)
		}
	}
	if len(same) == 0 {
		return fmt.Errorf("%w: dubbo: no service %s on port %d, nor %s with any other version or group "+
			"(check the interface name against the provider's; a port does not list its other services)",
			status.ErrServiceNotFound, id.key(), s.port, id.service)
	}
	off := func(v serviceID) int { // how many of version and group differ from id's
		n := 0
		if v.version != id.version {
			n++
		}
		if v.group != id.group {
			n++
		}
		return n
	}
	slices.SortFunc(same, func(a, b serviceID) int {
		return cmp.Or(cmp.Compare(off(a), off(b)), cmp.Compare(a.version, b.version), cmp.Compare(a.group, b.group))
	})
	var b strings.Builder
	for i, v := range same[:min(len(same), mostVariants)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(variant(v))
	}
	if len(same) > mostVariants {
		fmt.Fprintf(&b, "; and %d more", len(same)-mostVariants)
	}
	return fmt.Errorf("%w: dubbo: no service %s on port %d; it serves %s with %s "+
		"(a service is found by its interface, version and group together)",
		status.ErrServiceNotFound, id.key(), s.port, id.service, b.String())
}

// variant says id's version and group: `version "1.0" and no group`.
func variant(id serviceID) string {
	v, g := "no version", "no group"
	if id.version != "" {
		v = "version " + strconv.Quote(id.version)
	}
	if id.group != "" {
		g = "group " + strconv.Quote(id.group)
	}
	return v + " and " + g
}

func (s *server) serName(id byte) string {
	if ser, err := s.p.opts.Serializers.ByID(id); err == nil {
		return ser.Name()
	}
	return strconv.Itoa(int(id))
}

// call is what every call needs, in one allocation: its context, its
// invocation and room for its first arguments. The interface values of
// the arguments point into it (argSlots): a call is never reused.
type call struct {
	ctx  callCtx
	inv  protocol.Invocation
	args argSlots
}

var echoTypes = []reflect.Type{reflect.TypeFor[any]()}

// invoke calls inv, turning a panic into an error for this caller that
// carries an incident id, not the panic value; the value and the stack
// are logged on the provider under that id, once. This is the one place a
// panic of the provider's filters or of the service method is recovered:
// proxy.Provider lets it go on to here. (exchange.Server keeps a last guard
// for a panic of the protocol's own decoding, which has no method to blame.)
func (s *server) invoke(ctx context.Context, invoker protocol.Invoker, inv *protocol.Invocation) (res *protocol.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.p.stats.panics.Add(1)
			se, id := service.Panicked(inv.Service, inv.Method)
			s.p.opts.Logger.Error("provider method panicked", zap.String("incident", id),
				zap.String("service", inv.Service), zap.String("method", inv.Method),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			res, err = nil, se
		}
	}()
	return invoker.Invoke(ctx, inv)
}

// Export implements protocol.Protocol; see the Protocol doc.
func (p *Protocol) export(inv protocol.Invoker, given *tls.Config) (*Exporter, error) {
	if inv == nil || inv.URL() == nil {
		return nil, fmt.Errorf("dubbo: export: invoker without a URL")
	}
	u := inv.URL()
	if _, err := p.opts.Serializers.Get(u.Serialization()); err != nil {
		return nil, fmt.Errorf("dubbo: export %s: %w", u.ServiceKey(), err)
	}
	key := u.ServiceKey()
	reqAddr := net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("dubbo: export %s: %w", key, status.ErrClosed)
	}
	cfg := p.opts.ServerTLS
	if given != nil {
		cfg = minTLS12(given)
	}
	s := p.servers[reqAddr]
	fresh := s == nil
	if fresh {
		var err error
		if s, err = p.listen(u.Host, u.Port, given, cfg); err != nil {
			return nil, err
		}
	} else if s.tls != given {
		return nil, fmt.Errorf("dubbo: export %s: port %d already serves another TLS configuration (the services of a port share one)", key, s.port)
	}
	ser, _ := p.opts.Serializers.Get(u.Serialization())
	e := &exported{inv: inv, typer: argTyperOf(inv), observer: protocol.ResponseObserverOf(inv), serID: ser.ID(),
		names: exportedNames(u, inv), id: serviceID{u.Interface(), u.Version(), u.Group()}}
	if tok := u.Param(protocol.KeyToken, ""); tok != "" {
		e.token = []byte(tok)
	}
	if err := s.add(key, e); err != nil {
		if fresh {
			s.close()
		}
		return nil, err
	}
	if fresh {
		for _, k := range s.keys {
			p.servers[k] = s
		}
	}
	params := u.Params()
	delete(params, KeyTLS)
	delete(params, KeyMTLS)
	if cfg != nil {
		// Consumers learn from the registry that this port speaks TLS, and
		// whether it wants their certificate.
		params[KeyTLS] = "true"
		if cfg.ClientAuth == tls.RequireAndVerifyClientCert || cfg.ClientAuth == tls.RequireAnyClientCert {
			params[KeyMTLS] = "true"
		}
	}
	real := protocol.NewURL(u.Protocol, u.Host, s.port, u.Path, params)
	return &Exporter{url: real, inv: urlInvoker{Invoker: inv, u: real}, p: p, s: s, key: key}, nil
}

func (p *Protocol) unexport(e *Exporter) error {
	p.mu.Lock()
	left := e.s.remove(e.key)
	last := left == 0 && p.servers[e.s.keys[0]] == e.s
	if last {
		for _, k := range e.s.keys {
			delete(p.servers, k)
		}
	}
	p.mu.Unlock()
	if last {
		ctx, cancel := context.WithTimeout(context.Background(), unexportWait)
		defer cancel()
		return e.s.shutdown(ctx)
	}
	return nil
}

// urlInvoker is an exported invoker whose URL carries the real port.
type urlInvoker struct {
	protocol.Invoker
	u *protocol.URL
}

func (i urlInvoker) URL() *protocol.URL { return i.u }

// Unwrap returns the exported invoker.
func (i urlInvoker) Unwrap() protocol.Invoker { return i.Invoker }
