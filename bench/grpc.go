//go:build !benchone || bench_grpc

package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// grpc-go with a codec that passes bytes through (no protobuf, no
// generated code), unary calls.

func init() {
	register(system{name: "grpc", serve: grpcServe, dial: grpcDial})
}

// rawCodec marshals *[]byte as itself.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T is not *[]byte", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: %T is not *[]byte", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "raw" }

type grpcEchoServer interface{}

var grpcEchoDesc = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*grpcEchoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var b []byte
			if err := dec(&b); err != nil {
				return nil, err
			}
			return &b, nil
		},
	}},
}

func grpcServe(ln net.Listener) (string, string, error) {
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	s.RegisterService(&grpcEchoDesc, struct{}{})
	go s.Serve(ln)
	return ln.Addr().String(), "", nil
}

type grpcClient struct {
	cs   []*grpc.ClientConn
	next atomic.Uint32
}

func grpcDial(_ context.Context, addr, _ string, conns int) (caller, error) {
	c := &grpcClient{}
	for range conns {
		cc, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.cs = append(c.cs, cc)
	}
	return c, nil
}

func (c *grpcClient) Call(ctx context.Context, req []byte) ([]byte, error) {
	var out []byte
	err := c.cs[int(c.next.Add(1))%len(c.cs)].Invoke(ctx, "/bench.Echo/Echo", &req, &out)
	return out, err
}

func (c *grpcClient) Close() error {
	for _, cc := range c.cs {
		cc.Close()
	}
	return nil
}
