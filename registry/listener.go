package registry

import "github.com/minidubbo/minidubbo/protocol"

// RouterListener is an optional interface of a Listener: registries that
// keep routing rules (the routers category under a service in ZooKeeper)
// call NotifyRouters with the complete list of rule URLs now and after
// every change. Listeners without it get provider lists only. NotifyRouters
// calls for one subscription are in order but may run concurrently with
// Notify.
type RouterListener interface {
	NotifyRouters(routers []*protocol.URL)
}

// Category values of the category URL parameter, as Dubbo names them.
const (
	CategoryProviders     = "providers"
	CategoryConsumers     = "consumers"
	CategoryRouters       = "routers"
	CategoryConfigurators = "configurators"
)

// CategoryOf returns the category a URL registers under: its category
// parameter, else "consumers" for side=consumer, else "providers".
func CategoryOf(u *protocol.URL) string {
	if c := u.Param(protocol.KeyCategory, ""); c != "" {
		return c
	}
	if u.Param(protocol.KeySide, "") == "consumer" || u.Protocol == "consumer" {
		return CategoryConsumers
	}
	return CategoryProviders
}
