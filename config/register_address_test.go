package config_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// countingProxy forwards every connection it accepts to target and counts
// the connections.
type countingProxy struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{ln: ln}
	var mu sync.Mutex
	var open []net.Conn
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.conns.Add(1)
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// A provider with register_address registers that address instead of its
// listen address, and consumers reach it through whatever listens there.
func TestRegisterAddress(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	reg := memory.New()
	proxy := newCountingProxy(t, "127.0.0.1:"+strconv.Itoa(port))
	prov, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Protocols:  map[string]config.ProtocolConfig{"dubbo": {Port: port, RegisterAddress: proxy.ln.Addr().String()}},
		Services:   map[string]config.ServiceConfig{"orders": {Interface: "test.Orders"}},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	u, err := prov.Export(ctx, "orders", &orders{})
	require.NoError(t, err)
	assert.Equal(t, proxy.ln.Addr().String(), u.Address(), "Export returns the registered URL")

	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Orders"})
	var c ordersClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	n, err := c.Total(ctx, Order{Items: []string{"a", "b"}}, 3)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	assert.Equal(t, int64(1), proxy.conns.Load(), "the consumer connected through the registered address")
}

func TestRegisterAddressInvalid(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":20880", "host:port"} {
		c := &config.Config{Protocols: map[string]config.ProtocolConfig{"dubbo": {RegisterAddress: a}}}
		err := c.Validate()
		require.Error(t, err, a)
		assert.True(t, strings.Contains(err.Error(), "protocols.dubbo.register_address"), "%s: %v", a, err)
	}
}
