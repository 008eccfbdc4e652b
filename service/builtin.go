package service

import "context"

// EchoMethod is the built-in method that every exported service answers by
// returning its one argument unchanged, so that a consumer can check that a
// provider is alive and serving a service without calling a business method.
// The protocol answers it (protocol/dubbo, after checking the token and
// before any filter or method runs), never the service value.
const EchoMethod = "$echo"

// Echo is the consumer contract of EchoMethod. Refer it on its own, or
// embed it in a consumer stub struct:
//
//	type GreeterClient struct {
//		service.Echo
//		SayHello func(ctx context.Context, name string) (string, error)
//	}
//	v, err := client.Echo.Echo(ctx, "ping") // "ping"
type Echo struct {
	Echo func(ctx context.Context, v any) (any, error) `dubbo:"$echo"`
}

// Generic is the generic-invocation contract, for tools that do not have
// the service's Go types: call method with args and get the reply as a
// plain value (maps, slices, strings, numbers, as decoded from the wire).
// Implementations must be safe for concurrent use.
type Generic interface {
	Invoke(ctx context.Context, method string, args []any) (any, error)
}
