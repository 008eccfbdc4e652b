//go:build !benchone || bench_rpcx

package main

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
)

// rpcx with its raw-bytes serialization (SerializeNone).

func init() {
	register(system{name: "rpcx", serve: rpcxServe, dial: rpcxDial})
}

// EchoRPCX is the rpcx service.
type EchoRPCX struct{}

// Echo replies with its argument.
func (EchoRPCX) Echo(_ context.Context, req *[]byte, reply *[]byte) error {
	*reply = append((*reply)[:0], *req...)
	return nil
}

func rpcxServe(ln net.Listener) (string, string, error) {
	log.SetDummyLogger()
	s := server.NewServer()
	if err := s.RegisterName("Echo", EchoRPCX{}, ""); err != nil {
		return "", "", err
	}
	go s.ServeListener("tcp", ln)
	return ln.Addr().String(), "", nil
}

type rpcxClient struct {
	cs   []*client.Client
	next atomic.Uint32
}

func rpcxDial(_ context.Context, addr, _ string, conns int) (caller, error) {
	log.SetDummyLogger()
	c := &rpcxClient{}
	opt := client.DefaultOption
	opt.SerializeType = protocol.SerializeNone
	for range conns {
		rc := client.NewClient(opt)
		if err := rc.Connect("tcp", addr); err != nil {
			c.Close()
			return nil, err
		}
		c.cs = append(c.cs, rc)
	}
	return c, nil
}

func (c *rpcxClient) Call(ctx context.Context, req []byte) ([]byte, error) {
	var reply []byte
	err := c.cs[int(c.next.Add(1))%len(c.cs)].Call(ctx, "Echo", "Echo", &req, &reply)
	return reply, err
}

func (c *rpcxClient) Close() error {
	for _, rc := range c.cs {
		rc.Close()
	}
	return nil
}
