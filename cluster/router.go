package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/minidubbo/minidubbo/protocol"
)

// KeyForceTag is the attachment that, set to "true", keeps a tagged call
// from falling back to untagged providers.
const KeyForceTag = "dubbo.force.tag"

// Router narrows the providers a call may go to. Routing is split in two,
// so that the cluster invoker derives a subset once and reuses it for
// every call that needs it: Key tells, per call, which subset the call
// needs; Narrow computes that subset, once per directory snapshot and key.
// The cluster invoker runs its routers in order, each narrowing what the
// one before left.
//
// Both methods must be safe for concurrent use and must not block. Key
// runs on every call and should not allocate. Narrow must not modify
// invokers; it returns invokers itself when it keeps every provider (the
// load balancer's state is then shared with the wider list), and an empty
// result when no provider may take the calls of key.
type Router interface {
	Key(inv *protocol.Invocation) RouteKey
	Narrow(invokers []protocol.Invoker, key RouteKey) ([]protocol.Invoker, error)
}

// RouterFactory makes the router of one reference, given the reference's
// consumer URL (its application, interface and host, for rules that
// match on the consumer). config.WithRouter registers one by name.
type RouterFactory func(consumer *protocol.URL) (Router, error)

// RouteKey names one subset a router narrows a list to: calls with equal
// keys go to the same subset. Each router gives the fields its own
// meaning; the cluster only compares keys.
type RouteKey struct {
	Name    string
	Variant int
}

// Route returns the providers of invokers that r lets inv go to: Narrow
// for inv's key. The cluster invoker does not call it (it keeps the
// subsets); it is for tools and tests.
func Route(r Router, invokers []protocol.Invoker, inv *protocol.Invocation) ([]protocol.Invoker, error) {
	return r.Narrow(invokers, r.Key(inv))
}

// TagRouter routes calls by tag: a call whose dubbo.tag attachment is set
// goes to the providers whose URL has the same dubbo.tag parameter; when
// none has it, it falls back to the untagged providers, unless the call
// also carries dubbo.force.tag=true, in which case it gets no provider. A
// call without a tag goes to the untagged providers, or to all of them
// when every provider is tagged.
type TagRouter struct{}

var _ Router = (*TagRouter)(nil)

// NewTagRouter returns a tag router.
func NewTagRouter() *TagRouter { return &TagRouter{} }

// Key implements Router: the call's tag, and Variant 1 when it is forced.
func (r *TagRouter) Key(inv *protocol.Invocation) RouteKey {
	tag := inv.Attachment(protocol.KeyTag)
	if tag != "" && inv.Attachment(KeyForceTag) == "true" {
		return RouteKey{Name: tag, Variant: 1}
	}
	return RouteKey{Name: tag}
}

// Narrow implements Router.
func (r *TagRouter) Narrow(invokers []protocol.Invoker, key RouteKey) ([]protocol.Invoker, error) {
	var tagged, untagged []protocol.Invoker
	anyTag := false
	for _, p := range invokers {
		t := p.URL().Param(protocol.KeyTag, "")
		switch {
		case t == "":
			untagged = append(untagged, p)
		case key.Name != "" && t == key.Name:
			tagged = append(tagged, p)
			anyTag = true
		default:
			anyTag = true
		}
	}
	switch {
	case !anyTag:
		if key.Name != "" && key.Variant == 1 {
			return nil, nil
		}
		return invokers, nil // nothing tagged: the list itself
	case key.Name == "":
		if len(untagged) == 0 {
			return invokers, nil
		}
		return untagged, nil
	case len(tagged) > 0:
		return tagged, nil
	case key.Variant == 1:
		return nil, nil
	default:
		return untagged, nil
	}
}

// ConditionOptions configure a ConditionRouter.
type ConditionOptions struct {
	// Force keeps an empty result: no provider takes a matching call. When
	// false (the default), a rule that would leave no provider is ignored.
	Force bool
	// Priority orders routers read from the registry (lower first).
	Priority int
	// Consumer describes this consumer, for rules on the consumer's host
	// and parameters; nil means only method and attachments are known.
	Consumer *protocol.URL
}

// ConditionRouter applies one of Dubbo's condition rules,
// "consumer conditions => provider conditions": calls that match the
// consumer conditions may only go to providers that match the provider
// conditions. For example "method = find* => host = 127.0.0.2" sends the
// find methods to one host, and "host = 10.0.0.9 =>" (no provider
// conditions) forbids a consumer.
//
// A condition is key = value or key != value, values are comma lists and
// may contain the wildcard *, and conditions are joined with &. Consumer
// keys: method, host (the consumer's), and any other name is looked up in
// the consumer URL's parameters, then in the call's attachments. Provider
// keys: host, port, address, protocol, interface, method (the call's) and
// any URL parameter. An empty consumer side (or "true") matches every call.
type ConditionRouter struct {
	rule     string
	when     []condition
	then     []condition
	forbid   bool
	force    bool
	enabled  bool
	priority int
	consumer *protocol.URL
	byMethod bool // the provider side names the method
}

type condition struct {
	key        string
	matches    []string
	mismatches []string
}

var _ Router = (*ConditionRouter)(nil)

// NewConditionRouter parses rule. Errors name the part that is wrong.
func NewConditionRouter(rule string, o ConditionOptions) (*ConditionRouter, error) {
	r := &ConditionRouter{rule: rule, force: o.Force, enabled: true, priority: o.Priority, consumer: o.Consumer}
	whenRule, thenRule, ok := strings.Cut(rule, "=>")
	if !ok {
		whenRule, thenRule = "", rule
	}
	whenRule, thenRule = strings.TrimSpace(whenRule), strings.TrimSpace(thenRule)
	if whenRule == "" && thenRule == "" && !ok {
		return nil, errors.New("cluster: condition rule is empty")
	}
	var err error
	if whenRule != "" && whenRule != "true" {
		if r.when, err = parseConditions(whenRule); err != nil {
			return nil, fmt.Errorf("cluster: condition rule %q: consumer side: %w", rule, err)
		}
	}
	if thenRule == "" || thenRule == "false" {
		r.forbid = true
	} else if r.then, err = parseConditions(thenRule); err != nil {
		return nil, fmt.Errorf("cluster: condition rule %q: provider side: %w", rule, err)
	}
	for _, c := range r.then {
		if c.key == "method" {
			r.byMethod = true
		}
	}
	return r, nil
}

func parseConditions(s string) ([]condition, error) {
	var out []condition
	for clause := range strings.SplitSeq(s, "&") {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			return nil, errors.New("empty condition between '&'")
		}
		var key, vals string
		neg := false
		if k, v, ok := strings.Cut(clause, "!="); ok {
			key, vals, neg = k, v, true
		} else if k, v, ok := strings.Cut(clause, "="); ok {
			key, vals = k, v
		} else {
			return nil, fmt.Errorf("condition %q: want key = value or key != value", clause)
		}
		key = strings.TrimSpace(key)
		if key == "" || strings.ContainsAny(key, " \t,=!") {
			return nil, fmt.Errorf("condition %q: bad key %q", clause, key)
		}
		c := condition{key: key}
		for v := range strings.SplitSeq(vals, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				return nil, fmt.Errorf("condition %q: empty value", clause)
			}
			if neg {
				c.mismatches = append(c.mismatches, v)
			} else {
				c.matches = append(c.matches, v)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// Rule returns the rule text.
func (r *ConditionRouter) Rule() string { return r.rule }

// Priority returns the router's priority.
func (r *ConditionRouter) Priority() int { return r.priority }

// Key implements Router: Variant 0 for calls the rule does not apply to,
// 1 for those it applies to (with the method as Name when the provider
// side names the method).
func (r *ConditionRouter) Key(inv *protocol.Invocation) RouteKey {
	if !r.enabled || !r.matchWhen(inv) {
		return RouteKey{}
	}
	if r.byMethod {
		return RouteKey{Name: inv.Method, Variant: 1}
	}
	return RouteKey{Variant: 1}
}

// Narrow implements Router.
func (r *ConditionRouter) Narrow(invokers []protocol.Invoker, key RouteKey) ([]protocol.Invoker, error) {
	if key.Variant == 0 || len(invokers) == 0 {
		return invokers, nil
	}
	if r.forbid {
		return nil, nil
	}
	var out []protocol.Invoker
	for _, p := range invokers {
		if r.matchThen(p.URL(), key.Name) {
			out = append(out, p)
		}
	}
	if len(out) == len(invokers) {
		return invokers, nil
	}
	if len(out) == 0 && !r.force {
		return invokers, nil
	}
	return out, nil
}

func (r *ConditionRouter) matchWhen(inv *protocol.Invocation) bool {
	for _, c := range r.when {
		var v string
		switch c.key {
		case "method":
			v = inv.Method
		case "host":
			if r.consumer != nil {
				v = r.consumer.Host
			}
		case "interface", "service":
			v = inv.Service
		default:
			if r.consumer != nil {
				v = r.consumer.Param(c.key, "")
			}
			if v == "" {
				v = inv.Attachment(c.key)
			}
		}
		if !c.match(v) {
			return false
		}
	}
	return true
}

func (r *ConditionRouter) matchThen(u *protocol.URL, method string) bool {
	for _, c := range r.then {
		var v string
		switch c.key {
		case "host":
			v = u.Host
		case "port":
			v = strconv.Itoa(u.Port)
		case "address":
			v = u.Address()
		case "protocol":
			v = u.Protocol
		case "interface", "service":
			v = u.Interface()
		case "method":
			v = method
		default:
			v = u.Param(c.key, "")
		}
		if !c.match(v) {
			return false
		}
	}
	return true
}

// match applies Dubbo's rules: with only "=" values, v must match one;
// with only "!=" values, v must match none; with both, it must match one
// and none of the "!=". An absent value matches only "!=" conditions.
func (c condition) match(v string) bool {
	if v == "" {
		return len(c.matches) == 0
	}
	for _, m := range c.mismatches {
		if glob(m, v) {
			return false
		}
	}
	if len(c.matches) == 0 {
		return true
	}
	for _, m := range c.matches {
		if glob(m, v) {
			return true
		}
	}
	return false
}

// glob matches s against pattern, where * matches any run of characters.
func glob(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// ParseRouterURL builds a router from a URL of the registry's routers
// category, as Dubbo's admin tools write them:
// condition://0.0.0.0/demo.Greeter?category=routers&rule=<escaped rule>&force=true&priority=1&enabled=true.
// consumer describes this consumer (may be nil). An empty:// URL (the
// registry's "no routers") gives (nil, nil); other schemes are an error.
func ParseRouterURL(u, consumer *protocol.URL) (*ConditionRouter, error) {
	switch u.Protocol {
	case "empty":
		return nil, nil
	case "condition":
	default:
		return nil, fmt.Errorf("cluster: router url %s: scheme %q not supported (known: condition, empty)", u, u.Protocol)
	}
	rule := u.Param("rule", "")
	if strings.Contains(rule, "%") || (strings.Contains(rule, "+") && !strings.Contains(rule, " ")) {
		if un, err := url.QueryUnescape(rule); err == nil {
			rule = un
		}
	}
	if rule == "" {
		return nil, fmt.Errorf("cluster: router url %s: missing rule", u)
	}
	force, err := boolParam(u, "force")
	if err != nil {
		return nil, err
	}
	enabled := true
	if u.Param("enabled", "") != "" {
		if enabled, err = boolParam(u, "enabled"); err != nil {
			return nil, err
		}
	}
	prio, err := u.IntParam("priority", 0)
	if err != nil {
		return nil, fmt.Errorf("cluster: router url: %w", err)
	}
	r, err := NewConditionRouter(rule, ConditionOptions{Force: force, Priority: int(prio), Consumer: consumer})
	if err != nil {
		return nil, err
	}
	r.enabled = enabled
	return r, nil
}

func boolParam(u *protocol.URL, key string) (bool, error) {
	v := u.Param(key, "false")
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("cluster: router url parameter %s=%q is not a boolean", key, v)
	}
	return b, nil
}

// RoutersFromURLs turns the URLs of a routers category into routers sorted
// by priority, skipping empty:// entries. The first bad URL is an error.
func RoutersFromURLs(urls []*protocol.URL, consumer *protocol.URL) ([]Router, error) {
	var rs []*ConditionRouter
	for _, u := range urls {
		r, err := ParseRouterURL(u, consumer)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rs = append(rs, r)
		}
	}
	slices.SortStableFunc(rs, func(a, b *ConditionRouter) int { return cmp.Compare(a.priority, b.priority) })
	out := make([]Router, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out, nil
}
