package registry

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// Health is what a registry can say about itself and about one service,
// for the errors and logs that must say which registry was asked and
// whether it answers ("no provider" errors, Refer, Export).
type Health struct {
	// Address is the registry's address, such as zookeeper://127.0.0.1:2181.
	Address string
	// Connected reports whether the registry answers now (for ZooKeeper: a
	// session is up).
	Connected bool
	// Since is when Connected last changed (zero: unknown).
	Since time.Time
	// Listed reports whether the service's providers were listed since the
	// subscription began; Registered is only meaningful when it is true.
	Listed bool
	// Registered counts the providers of the service's interface last
	// listed, of every version and group, including those the consumer's
	// version and group do not match.
	Registered []Registered
}

// Registered is a count of providers of one version and group.
type Registered struct {
	Version, Group string
	Providers      int
}

// HealthReporter is implemented by registries that can report their
// Health (registry/zookeeper, registry/memory). consumer names the service
// (its interface) whose registrations to summarize; it may be nil.
type HealthReporter interface {
	Health(consumer *protocol.URL) Health
}

// Summarize counts providers by version and group, sorted.
func Summarize(providers []*protocol.URL) []Registered {
	var out []Registered
	for _, u := range providers {
		v, g := u.Version(), u.Group()
		i := slices.IndexFunc(out, func(r Registered) bool { return r.Version == v && r.Group == g })
		if i < 0 {
			out = append(out, Registered{Version: v, Group: g})
			i = len(out) - 1
		}
		out[i].Providers++
	}
	slices.SortFunc(out, func(a, b Registered) int {
		if c := strings.Compare(a.Version, b.Version); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return out
}

// String reads like `zookeeper://127.0.0.1:2181 (connected; registered:
// version "1.0" on 2 providers, version "2.0" group "eu" on 1 provider)`.
func (h Health) String() string {
	var b strings.Builder
	b.WriteString(h.Address)
	b.WriteString(" (")
	if h.Connected {
		b.WriteString("connected")
	} else {
		b.WriteString("not connected")
		if !h.Since.IsZero() {
			b.WriteString(" for " + time.Since(h.Since).Round(100*time.Millisecond).String())
		}
	}
	if h.Listed {
		b.WriteString("; registered: ")
		if len(h.Registered) == 0 {
			b.WriteString("no provider of any version")
		}
		for i, r := range h.Registered {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "version %q", r.Version)
			if r.Group != "" {
				fmt.Fprintf(&b, " group %q", r.Group)
			}
			b.WriteString(" on " + strconv.Itoa(r.Providers) + " provider")
			if r.Providers != 1 {
				b.WriteString("s")
			}
		}
	} else if !h.Connected {
		b.WriteString("; never listed the providers")
	}
	b.WriteString(")")
	return b.String()
}
