package registry

import "context"

// Lister reads what a registry holds, without changing it, for tools such
// as minidubbo ls. registry/zookeeper implements it with
// zookeeper.NewLister.
type Lister interface {
	// Services returns the names of the services the registry has nodes
	// for, sorted.
	Services(ctx context.Context) ([]string, error)
	// Nodes returns the entries of one category (CategoryProviders,
	// CategoryConsumers, "routers") of service, as stored: normally URLs,
	// possibly malformed ones. found is false when the service has no such
	// category.
	Nodes(ctx context.Context, service, category string) (nodes []string, found bool, err error)
	// Close releases the connection.
	Close() error
}
