// Package registry publishes providers and tells consumers about them: the
// Registry interface, the registry directory that turns provider lists into
// invokers for the cluster layer, and the provider cache (memory and disk)
// that keeps calls going while the registry is unreachable. Implementations
// live in registry/zookeeper and registry/memory.
package registry
