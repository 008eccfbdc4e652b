//go:build !benchone || bench_kitex

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"

	"github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/client/genericclient"
	"github.com/cloudwego/kitex/pkg/generic"
	"github.com/cloudwego/kitex/pkg/klog"
	"github.com/cloudwego/kitex/pkg/transmeta"
	"github.com/cloudwego/kitex/server"
	"github.com/cloudwego/kitex/server/genericserver"
	"github.com/cloudwego/kitex/transport"
)

// Kitex over netpoll with multiplexed connections (TTHeader framing,
// WithMuxConnection on the client, WithMuxTransport on the server) and
// binary generic calls, without IDL or generated code: the payload travels
// as a thrift struct with one binary field, which the server's handler for
// unknown methods echoes back as raw bytes.

func init() {
	register(system{name: "kitex", serve: kitexServe, dial: kitexDial})
}

const (
	kitexService = "bench"
	kitexMethod  = "Echo"
	// kitexField is a binary field (type 11) with id 1 and a 4-byte length.
	kitexField = 7
)

func kitexEcho(_ context.Context, _, _ string, request any) (any, error) {
	req, ok := request.([]byte)
	if !ok {
		return nil, fmt.Errorf("kitex echo: request %T", request)
	}
	return bytes.Clone(req), nil
}

// kitexQuiet silences Kitex's logger once per process: setting its level
// while a server in the same process logs (the tests run both) is a race.
var kitexQuiet = sync.OnceFunc(func() { klog.SetLevel(klog.LevelFatal) })

func kitexServe(ln net.Listener) (string, string, error) {
	kitexQuiet()
	s := server.NewServer(
		server.WithListener(ln),
		server.WithMuxTransport(),
		server.WithMetaHandler(transmeta.ServerTTHeaderHandler))
	if err := genericserver.RegisterUnknownServiceOrMethodHandler(s,
		&genericserver.UnknownServiceOrMethodHandler{DefaultHandler: kitexEcho}); err != nil {
		return "", "", err
	}
	go s.Run()
	return ln.Addr().String(), "", nil
}

type kitexClient struct{ c genericclient.Client }

func kitexDial(_ context.Context, addr, _ string, conns int) (caller, error) {
	kitexQuiet()
	c, err := genericclient.NewClient(kitexService, generic.BinaryThriftGenericV2(kitexService),
		client.WithHostPorts(addr),
		client.WithMuxConnection(conns),
		client.WithTransportProtocol(transport.TTHeaderFramed),
		client.WithMetaHandler(transmeta.ClientTTHeaderHandler))
	if err != nil {
		return nil, err
	}
	return &kitexClient{c}, nil
}

func (k *kitexClient) Call(ctx context.Context, req []byte) ([]byte, error) {
	buf := make([]byte, 0, kitexField+len(req)+1)
	buf = append(buf, 11, 0, 1)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(req)))
	buf = append(buf, req...)
	buf = append(buf, 0) // field stop
	resp, err := k.c.GenericCall(ctx, kitexMethod, buf)
	if err != nil {
		return nil, err
	}
	b, ok := resp.([]byte)
	if !ok || len(b) < kitexField+1 || int(binary.BigEndian.Uint32(b[3:7])) != len(b)-kitexField-1 {
		return nil, fmt.Errorf("kitex: reply %T of %d bytes is not the struct sent", resp, len(b))
	}
	return b[kitexField : len(b)-1], nil
}

func (k *kitexClient) Close() error { return k.c.Close() }
