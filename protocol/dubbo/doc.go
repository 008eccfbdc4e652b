// Package dubbo is the dubbo protocol: it serves provider invokers on a TCP
// port and refers remote providers as invokers, over the exchange layer's
// multiplexed connections.
//
// A provider exports one or more invokers; services that share a port share
// one server, and requests are routed by service key (group/interface:version):
//
//	p, err := dubbo.New(nil) // nil: DefaultOptions()
//	defer p.Close()
//	exp, err := p.Export(invoker) // invoker.URL() is dubbo://127.0.0.1:0/demo.Greeter
//	// exp.URL() carries the real port.
//
// A consumer refers a provider by URL; the connection is dialled on the
// first call and re-dialled when it breaks:
//
//	inv, err := p.Refer(u)
//	res, err := inv.Invoke(ctx, &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{"world"}})
//
// The request body is, in the URL's serialization (msgpack by default):
// service, version, group, method, timeout in milliseconds, attachments,
// argument count, each argument. The provider checks the token and looks
// the service and method up before it decodes any argument, and decodes
// each argument straight into the parameter type the invoker declares
// through protocol.ArgTyper. The response body is a kind (error, value, or
// null), then the error's code and message or the value, then attachments.
// So the protocol itself writes only strings, integers and string maps: a
// serialization of one's own (serialize.Stream) needs no framework type.
//
// A []byte result of 4 KiB or more is not copied into the response: the
// frame refers to it and writev sends it from the method's own array
// (transport.Buffer.Splice), so a method must not modify a []byte it has
// returned (package service, "Byte slices and ownership"). With msgpack
// (other serializations copy), a consumer's []byte or string argument of
// 4 KiB or more is spliced into the request
// the same way, from the caller's memory, and given back before the call
// returns, however it ends (exchange.Client.Call): a caller may reuse it
// at once, and must not modify it while the call runs.
//
// A parameter of type service.Borrowed is decoded as a slice of the
// request's frame (msgpack; other serializations copy), not a copy: the
// frame goes back to its pool once the method has returned and the
// response, which may send those bytes (a Borrowed argument returned as
// the reply is spliced like any large []byte), has been written
// (exchange.Request.KeepBody). A request without such an argument goes
// back to its pool as soon as the method returns.
//
// The protocol answers service.EchoMethod itself, after the token check,
// and recovers a panic of the provider's filters or method (the caller gets
// service.CodePanic with an incident id; the stack is logged under it).
package dubbo
