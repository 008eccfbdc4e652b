package protocol

// Protocol exports provider invokers on the network and refers remote
// providers as invokers. The dubbo protocol (protocol/dubbo) implements it.
// Implementations must be safe for concurrent use.
type Protocol interface {
	// Export serves inv at the address of inv.URL(); several services may
	// share one port. The returned Exporter stops serving it.
	Export(inv Invoker) (Exporter, error)
	// Refer returns an invoker for the provider at u. It does not block on
	// the network: the connection is dialled lazily and re-dialled when it
	// breaks. The invoker implements io.Closer.
	Refer(u *URL) (Invoker, error)
	// Close stops every server and closes every connection.
	Close() error
}
