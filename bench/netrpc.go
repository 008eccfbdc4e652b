//go:build !benchone || bench_netrpc

package main

import (
	"context"
	"net"
	"net/rpc"
	"sync/atomic"
)

// Go's net/rpc with its default gob codec.

func init() {
	register(system{name: "netrpc", serve: netrpcServe, dial: netrpcDial})
}

// EchoRPC is the net/rpc service.
type EchoRPC struct{}

// Echo replies with its argument.
func (EchoRPC) Echo(req []byte, reply *[]byte) error {
	*reply = req
	return nil
}

func netrpcServe(ln net.Listener) (string, string, error) {
	s := rpc.NewServer()
	if err := s.RegisterName("Echo", EchoRPC{}); err != nil {
		return "", "", err
	}
	go s.Accept(ln)
	return ln.Addr().String(), "", nil
}

type netrpcClient struct {
	cs   []*rpc.Client
	next atomic.Uint32
}

func netrpcDial(_ context.Context, addr, _ string, conns int) (caller, error) {
	c := &netrpcClient{}
	for range conns {
		rc, err := rpc.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.cs = append(c.cs, rc)
	}
	return c, nil
}

func (c *netrpcClient) Call(_ context.Context, req []byte) ([]byte, error) {
	var reply []byte
	err := c.cs[int(c.next.Add(1))%len(c.cs)].Call("Echo.Echo", req, &reply)
	return reply, err
}

func (c *netrpcClient) Close() error {
	for _, rc := range c.cs {
		rc.Close()
	}
	return nil
}
