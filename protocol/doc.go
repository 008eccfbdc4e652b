// Package protocol holds the vocabulary every layer above the wire shares:
// URL (the provider descriptor stored in the registry), Invocation, Result,
// Invoker, Protocol, Exporter and the Filter chain, and the Table by which
// protocols are chosen by name (config.WithProtocol adds to an
// application's). The dubbo protocol, built on the exchange layer, is in
// protocol/dubbo; the built-in filters (counting, token attach, executes)
// are in protocol/filter.
//
// An Invoker is this framework's http.RoundTripper: the cluster layer, the
// filters, the dubbo protocol client and provider-side service wrappers all
// implement it, and a call is a chain of Invoke calls from the consumer stub
// down to the connection, and from the connection up to the service method.
package protocol
