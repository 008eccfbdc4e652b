// Package dubbo is the dubbo protocol: it serves provider invokers on a TCP
// port and refers remote providers as invokers, over the exchange layer's
// multiplexed connections.
//
// A provider exports one or more invokers; services that share a port share
// one server, and requests are routed by service key (group/interface:version):
//
//	p := dubbo.New(nil)
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
// service, version, group, method, timeout in milliseconds, argument count,
// each argument, attachments. The provider looks the service and method up
// before it decodes any argument, and decodes each argument straight into
// the parameter type the invoker declares through protocol.ArgTyper. The
// response body is a kind (error, value, or null), the error or value, and
// attachments.
package dubbo
