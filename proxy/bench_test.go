package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
)

// payload581 is the 581-byte string of the speed targets.
var payload581 = strings.Repeat("x", 581)

// BenchmarkStubFake measures the consumer stub alone: a call through a
// filled func field to a fake invoker that writes the reply and returns a
// Result (the fake's Result is 1 of the allocations reported).
func BenchmarkStubFake(b *testing.B) {
	inv := protocol.InvokerFunc{U: testURL(), F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
		if r, ok := inv.Reply.(*string); ok {
			*r = inv.Args[0].(string)
		}
		return &protocol.Result{Value: inv.Reply}, nil
	}}
	var c struct {
		Echo func(context.Context, string) (string, error)
		Ping func(context.Context) error
	}
	if err := proxy.Refer(&c, inv); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("string", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := c.Echo(ctx, payload581)
			if err != nil || len(s) != 581 {
				b.Fatal(s, err)
			}
		}
	})
	b.Run("noargs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProviderInvoke measures a provider invoker dispatching one call
// with arguments already of the declared types, as protocol/dubbo passes them.
func BenchmarkProviderInvoke(b *testing.B) {
	p, err := proxy.NewProvider(testURL(), &greeterImpl{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	inv := &protocol.Invocation{Method: "Add", Args: []any{int32(1), int32(2)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Invoke(ctx, inv); err != nil {
			b.Fatal(err)
		}
	}
}
