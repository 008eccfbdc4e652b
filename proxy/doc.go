// Package proxy turns user code into invokers and invokers into user code:
// consumer stubs fill the func fields of a user struct with closures that
// build an Invocation and call an invoker; provider invokers dispatch an
// Invocation to a method of a service value. It also offers generic
// invocation (method name and []any arguments) for tools.
//
// A provider is any Go value whose exported methods take a context first
// and return (T, error) or error:
//
//	type Greeter struct{}
//	func (Greeter) SayHello(ctx context.Context, name string) (string, error)
//
//	provider, err := proxy.NewProvider(u, Greeter{}) // a protocol.Invoker
//	exporter, err := dubboProtocol.Export(provider)
//
// A consumer declares a struct of func fields with the same shapes and lets
// Refer fill it:
//
//	type GreeterClient struct {
//		SayHello func(ctx context.Context, name string) (string, error)
//	}
//	var c GreeterClient
//	err := proxy.Refer(&c, invoker) // invoker from a protocol or a cluster
//	reply, err := c.SayHello(ctx, "world")
//
// A business error returned by the provider method reaches the consumer as
// a *service.Error (errors.As) with Remote set; attachments travel in the
// context (service.WithAttachment, service.AttachmentsFrom).
//
// Arguments: with msgpack (the default serialization; others copy), a
// stub's []byte or string argument of 4 KiB or more is sent from the
// caller's own memory, not copied; the stub returns only once the
// connection no longer reads it, however the call ends (timeout, cancel,
// error), so the caller may reuse it as soon as the stub returns, and must
// not modify it while the call runs (package service, "Byte slices and
// ownership").
package proxy
