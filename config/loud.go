package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// The registry is never silently absent: the helpers here put what a
// registry can say about itself (registry.Health) into Export's and
// Refer's errors, and into "no provider" errors at call time.

// ErrRegistryUnreachable is wrapped by Export's error when a registry
// did not answer within its timeout (and its check is on), and by
// Refer's error when the reference has Check, no provider list came in
// time and none of its registries is connected.
var ErrRegistryUnreachable = errors.New("registry unreachable")

// errNilContext is Export's and Refer's error for a nil context, which
// would otherwise panic deep in the registry or the protocol.
var errNilContext = errors.New("nil context.Context: pass context.Background(), or a context with a deadline to bound the wait")

// anyConnected reports whether one of regs says it is connected; a
// registry that cannot tell (no registry.HealthReporter) counts as
// connected.
func anyConnected(regs []registry.Registry) bool {
	if len(regs) == 0 {
		return true
	}
	for _, r := range regs {
		hr, ok := r.(registry.HealthReporter)
		if !ok || hr.Health(nil).Connected {
			return true
		}
	}
	return false
}

// registryIDs returns ids, or every registry id when ids is empty.
func (a *Application) registryIDs(ids []string) []string {
	if len(ids) == 0 {
		return sortedKeys(a.cfg.Registries)
	}
	return ids
}

// describeRegistries says, for each registry (regs[i] has id ids[i]) that
// can tell, its address, whether it is connected, and what it lists for
// consumer's interface: `registry zk: zookeeper://127.0.0.1:2181
// (connected; registered: version "1.0" on 2 providers)`.
func (a *Application) describeRegistries(ids []string, regs []registry.Registry, consumer *protocol.URL) string {
	parts := make([]string, 0, len(ids))
	for i, id := range ids {
		if hr, ok := regs[i].(registry.HealthReporter); ok {
			parts = append(parts, "registry "+id+": "+hr.Health(consumer).String())
		} else {
			parts = append(parts, "registry "+id+": "+a.cfg.Registries[id].Address)
		}
	}
	return strings.Join(parts, "; ")
}

// awaitRegistry waits until the registry id answers, at most its timeout
// (or until ctx is done). A registry that cannot tell is taken as
// answering. The error names the registry and its address, and how to opt
// into registering in the background.
func (a *Application) awaitRegistry(ctx context.Context, id string, r registry.Registry, what string) error {
	hr, ok := r.(registry.HealthReporter)
	if !ok || hr.Health(nil).Connected {
		return nil
	}
	rc := a.cfg.Registries[id]
	deadline := time.NewTimer(rc.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if hr.Health(nil).Connected {
				return nil
			}
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		return &KeyError{
			Key: "registries." + id + ".address",
			Advice: "is the registry running at that address? Or set registries." + id +
				".check: false to register in the background once it answers",
			Err: fmt.Errorf("%w: registry %s (%s) did not answer within %v; %s not registered",
				ErrRegistryUnreachable, id, rc.Address, rc.Timeout, what),
		}
	}
}

// explainNoProvider returns what adds the registries' view to "no
// provider" errors of ref's calls (cluster.Options.NoProvider): which
// registry was asked, whether it is connected, and which versions and
// groups of the interface it lists.
func (a *Application) explainNoProvider(ref *reference, s refSpec) func(error) error {
	ids := a.registryIDs(s.rc.Registries)
	return func(err error) error {
		asked := a.describeRegistries(ids, ref.subs, ref.consumer)
		return adviseNoProvider(fmt.Errorf("%w; asked %s", err, asked), s, ids, ref.subs, ref.consumer)
	}
}

// adviseNoProvider returns err, a "no provider" of reference s whose
// registries ids (opened as regs) were asked, as a KeyError with what to
// do when the registries tell: start a provider when every one answers
// and lists none of the interface (key: the reference's interface), start
// the registry or fix its address when none answers (key: the first
// one's address); otherwise err as it is (what they list says it). A
// program giving its own advice leaves this out with WithoutAdvice.
func adviseNoProvider(err error, s refSpec, ids []string, regs []registry.Registry, consumer *protocol.URL) error {
	if noneRegistered(regs, consumer) {
		return &KeyError{Key: s.key + ".interface", Err: err,
			Advice: "is a provider of " + consumer.Interface() + " running? Its interface name must be this one exactly"}
	}
	if len(ids) > 0 && !anyConnected(regs) {
		return &KeyError{Key: "registries." + ids[0] + ".address", Err: err,
			Advice: "is the registry running at that address? Providers are found only once it answers"}
	}
	return err
}

// noneRegistered reports whether every one of regs is connected and lists
// no provider of consumer's interface, of any version or group: nothing
// to match, so the advice is to start one, not to fix a version.
func noneRegistered(regs []registry.Registry, consumer *protocol.URL) bool {
	for _, r := range regs {
		hr, ok := r.(registry.HealthReporter)
		if !ok {
			return false
		}
		h := hr.Health(consumer)
		if !h.Connected || !h.Listed || len(h.Registered) > 0 {
			return false
		}
	}
	return len(regs) > 0
}
