package registry

import (
	"strings"

	"github.com/minidubbo/minidubbo/protocol"
)

// Any is the wildcard for a consumer's version or group: it matches every
// provider version or group.
const Any = "*"

// Match reports whether provider serves what consumer asks for: the same
// interface, the same version (or the consumer asks for Any), and the same
// group (or the consumer asks for Any, or lists the provider's group among
// comma-separated groups). Providers with protocol "empty" or the parameter
// enabled=false never match.
func Match(consumer, provider *protocol.URL) bool {
	if provider.Protocol == "empty" || provider.Param("enabled", "true") == "false" {
		return false
	}
	if consumer.Interface() != provider.Interface() {
		return false
	}
	if v := consumer.Version(); v != Any && v != provider.Version() {
		return false
	}
	g := consumer.Group()
	if g == Any || g == provider.Group() {
		return true
	}
	if strings.Contains(g, ",") {
		for part := range strings.SplitSeq(g, ",") {
			if strings.TrimSpace(part) == provider.Group() {
				return true
			}
		}
	}
	return false
}

// Filter returns the providers that Match consumer, without duplicates (by
// String), in the order given.
func Filter(consumer *protocol.URL, providers []*protocol.URL) []*protocol.URL {
	out := make([]*protocol.URL, 0, len(providers))
	seen := make(map[string]struct{}, len(providers))
	for _, p := range providers {
		if p == nil || !Match(consumer, p) {
			continue
		}
		s := p.String()
		if _, dup := seen[s]; dup {
			continue
		}
		seen[s] = struct{}{}
		out = append(out, p)
	}
	return out
}
