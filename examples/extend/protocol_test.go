package extend_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// lineProto is a protocol of its own: one JSON line per request and one
// per answer over TCP, one call at a time per connection. Its URLs are
// line://host:port/interface.
type lineProto struct {
	calls atomic.Int64 // calls served

	mu      sync.Mutex
	servers map[int]*lineServer // by port
	conns   []*lineInvoker
	wg      sync.WaitGroup
}

type lineRequest struct {
	Service     string            `json:"service"`
	Method      string            `json:"method"`
	Args        []json.RawMessage `json:"args"`
	Attachments map[string]string `json:"attachments,omitempty"`
}

type lineAnswer struct {
	Value   json.RawMessage `json:"value,omitempty"`
	Code    service.Code    `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
}

type lineServer struct {
	ln       net.Listener
	mu       sync.Mutex
	services map[string]protocol.Invoker // by service key
	conns    map[net.Conn]bool
}

func (p *lineProto) Export(inv protocol.Invoker) (protocol.Exporter, error) {
	u := inv.URL()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[u.Port]
	if s == nil || u.Port == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
		if err != nil {
			return nil, err
		}
		s = &lineServer{ln: ln, services: map[string]protocol.Invoker{}, conns: map[net.Conn]bool{}}
		p.servers[ln.Addr().(*net.TCPAddr).Port] = s
		p.wg.Go(func() { p.accept(s) })
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.services[u.ServiceKey()]; ok {
		return nil, fmt.Errorf("line: %s already exported", u.ServiceKey())
	}
	s.services[u.ServiceKey()] = inv
	real := protocol.NewURL(u.Protocol, u.Host, s.ln.Addr().(*net.TCPAddr).Port, u.Path, u.Params())
	return &lineExporter{s: s, key: u.ServiceKey(), url: real, inv: inv}, nil
}

func (p *lineProto) accept(s *lineServer) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		p.wg.Go(func() { p.serve(s, c) })
	}
}

func (p *lineProto) serve(s *lineServer, c net.Conn) {
	defer c.Close()
	in, out := bufio.NewScanner(c), json.NewEncoder(c)
	for in.Scan() {
		var req lineRequest
		var ans lineAnswer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = lineAnswer{Code: service.CodeInvalidArgument, Message: err.Error()}
		} else {
			ans = p.call(s, c, &req)
		}
		if out.Encode(ans) != nil {
			return
		}
	}
}

// call decodes the arguments into the types the service declares and
// calls it.
func (p *lineProto) call(s *lineServer, c net.Conn, req *lineRequest) lineAnswer {
	p.calls.Add(1)
	s.mu.Lock()
	inv := s.services[req.Service]
	s.mu.Unlock()
	if inv == nil {
		return lineAnswer{Code: service.CodeNotFound, Message: "no service " + req.Service}
	}
	types, _ := argTyper(inv).ArgTypes(req.Method)
	args := make([]any, len(req.Args))
	for i, raw := range req.Args {
		if i >= len(types) {
			return lineAnswer{Code: service.CodeInvalidArgument, Message: "too many arguments"}
		}
		v := reflect.New(types[i])
		if err := json.Unmarshal(raw, v.Interface()); err != nil {
			return lineAnswer{Code: service.CodeInvalidArgument, Message: err.Error()}
		}
		args[i] = v.Elem().Interface()
	}
	res, err := inv.Invoke(context.Background(), &protocol.Invocation{
		Service: req.Service, Method: req.Method, Args: args, Attachments: req.Attachments, RemoteAddr: c.RemoteAddr()})
	if err != nil {
		se := service.FromError(err)
		return lineAnswer{Code: se.Code, Message: se.Message}
	}
	b, err := json.Marshal(res.Value)
	if err != nil {
		return lineAnswer{Code: service.CodeUnknown, Message: err.Error()}
	}
	return lineAnswer{Value: b}
}

// argTyper finds the provider's argument types behind the filters config
// puts in front of it.
func argTyper(inv protocol.Invoker) protocol.ArgTyper {
	for {
		if t, ok := inv.(protocol.ArgTyper); ok {
			return t
		}
		u, ok := inv.(interface{ Unwrap() protocol.Invoker })
		if !ok {
			return noTypes{}
		}
		inv = u.Unwrap()
	}
}

type noTypes struct{}

func (noTypes) ArgTypes(string) ([]reflect.Type, bool) { return nil, false }

type lineExporter struct {
	s   *lineServer
	key string
	url *protocol.URL
	inv protocol.Invoker
}

func (e *lineExporter) URL() *protocol.URL        { return e.url }
func (e *lineExporter) Invoker() protocol.Invoker { return e.inv }
func (e *lineExporter) Unexport() error {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	delete(e.s.services, e.key)
	return nil
}

// lineInvoker calls one provider over one connection, dialled on the
// first call and again after it broke.
type lineInvoker struct {
	u  *protocol.URL
	mu sync.Mutex
	c  net.Conn
	in *bufio.Scanner
}

func (p *lineProto) Refer(u *protocol.URL) (protocol.Invoker, error) {
	inv := &lineInvoker{u: u}
	p.mu.Lock()
	p.conns = append(p.conns, inv)
	p.mu.Unlock()
	return inv, nil
}

func (i *lineInvoker) URL() *protocol.URL { return i.u }

func (i *lineInvoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	req := lineRequest{Service: inv.Service, Method: inv.Method, Attachments: inv.Attachments}
	if req.Service == "" {
		req.Service = i.u.ServiceKey()
	}
	for _, a := range inv.Args {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		req.Args = append(req.Args, b)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.c == nil {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", i.u.Address())
		if err != nil {
			return nil, fmt.Errorf("line: %w: %w", status.ErrDial, err)
		}
		i.c, i.in = c, bufio.NewScanner(c)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = i.c.SetDeadline(dl)
	}
	if err := json.NewEncoder(i.c).Encode(req); err != nil || !i.in.Scan() {
		i.c.Close()
		i.c = nil
		return nil, fmt.Errorf("line: %w", status.ErrConnLost)
	}
	var ans lineAnswer
	if err := json.Unmarshal(i.in.Bytes(), &ans); err != nil {
		return nil, err
	}
	if ans.Code != 0 || ans.Message != "" {
		return nil, &service.Error{Code: ans.Code, Message: ans.Message, Remote: true}
	}
	res := &protocol.Result{}
	if inv.Reply != nil {
		if err := json.Unmarshal(ans.Value, inv.Reply); err != nil {
			return nil, err
		}
		res.Value = inv.Reply
	} else if err := json.Unmarshal(ans.Value, &res.Value); err != nil {
		return nil, err
	}
	return res, nil
}

func (i *lineInvoker) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.c != nil {
		i.c.Close()
		i.c = nil
	}
	return nil
}

// Close stops every server and connection and waits for their goroutines.
func (p *lineProto) Close() error {
	p.mu.Lock()
	for _, s := range p.servers {
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	}
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return nil
}

const protocolYAML = `
registries:
  mem: {address: "memory://line"}
protocols:
  plain: {name: line, port: 0}
  classic: {port: 0}
services:
  greeter: {interface: demo.Greeter, protocol: plain}
  other:   {interface: demo.Other, protocol: classic}
references:
  greeter: {interface: demo.Greeter, check: true}
  other:   {interface: demo.Other, check: true}
`

// A protocol named in YAML: the greeter is served and called over the
// line protocol (a struct both ways and a business error included), next
// to a service on the built-in dubbo protocol in the same application;
// each reference refers its provider with the protocol of the provider
// URL's scheme.
func TestOwnProtocolFromYAML(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var made atomic.Int64
	line := &lineProto{servers: map[int]*lineServer{}}
	cfg, err := config.Parse(strings.NewReader(protocolYAML))
	require.NoError(t, err)
	app, err := config.New(cfg, config.WithProtocol("line", func(protocol.Settings) (protocol.Protocol, error) {
		made.Add(1)
		return line, nil
	}))
	require.NoError(t, err)
	defer app.Shutdown(context.Background())

	u, err := app.Export(ctx, "greeter", greeter{})
	require.NoError(t, err)
	assert.Equal(t, "line", u.Protocol, "registered as line://")
	assert.NotZero(t, u.Port)
	uo, err := app.Export(ctx, "other", named("dubbo"))
	require.NoError(t, err)
	assert.Equal(t, "dubbo", uo.Protocol)

	var c greeterClient
	require.NoError(t, app.Refer(ctx, "greeter", &c))
	got, err := c.SayHello(ctx, "world")
	require.NoError(t, err)
	assert.Equal(t, "hello world", got)
	p, err := c.Older(ctx, Person{Name: "ann", Age: 41})
	require.NoError(t, err)
	assert.Equal(t, Person{Name: "ann", Age: 42}, p)
	_, err = c.Older(ctx, Person{Name: "bob", Age: -1})
	var se *service.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, service.CodeInvalidArgument, se.Code)
	assert.Equal(t, "bob is not born yet", se.Message)
	assert.Equal(t, int64(3), line.calls.Load(), "every greeter call went over the line protocol")

	var o struct {
		SayHello func(ctx context.Context, name string) (string, error)
	}
	require.NoError(t, app.Refer(ctx, "other", &o))
	got, err = o.SayHello(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, "dubbo says hello x", got)
	assert.Equal(t, int64(3), line.calls.Load(), "the dubbo service's call did not")
	assert.Equal(t, int64(1), made.Load(), "one line protocol per application")

	// The monitor counted the line calls like any others.
	var served int64
	for _, s := range app.Monitor().Snapshot() {
		if s.Service == "demo.Greeter" && s.Side == monitor.Provider {
			served += s.Calls
		}
	}
	assert.Equal(t, int64(3), served)

	// A protocol nobody added is refused, listing the known ones.
	_, err = config.New(cfg)
	require.ErrorContains(t, err, `protocols.plain.name "line": unknown protocol (known: dubbo)`)
	_, err = config.New(cfg, config.WithProtocol("line", func(protocol.Settings) (protocol.Protocol, error) {
		return nil, errors.New("no line today")
	}))
	require.ErrorContains(t, err, "protocol line: no line today")
}
