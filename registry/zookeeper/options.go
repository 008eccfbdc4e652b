package zookeeper

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/registry"
)

// Defaults of Options; DefaultOptions returns them all, with the defaults
// derived from the session timeout (WatchdogTimeout, EmptyGrace,
// RegisterWait) worked out for DefaultSessionTimeout.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultRoot           = "dubbo"
	DefaultRetryMin       = 200 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
	DefaultResync         = 30 * time.Second
	DefaultMaxChildren    = 10000
	DefaultMaxBufferSize  = 16 << 20
	// MinMaxBufferSize is the smallest MaxBufferSize accepted.
	MinMaxBufferSize = 64 << 10
	DefaultPort      = 2181
)

// Options configure a Registry. As in every layer's options: every zero
// field means the default (DefaultOptions shows them; New first fills
// unset fields from the address parameters); a negative field is invalid
// (Validate). Off is said with a field of its own (NoCacheFile), never
// with a number.
type Options struct {
	// Application names this process; it is part of the default cache
	// file name.
	Application string
	// SessionTimeout is the ZooKeeper session timeout (default 10 s). The
	// server clamps it to [2, 20] × its tickTime.
	SessionTimeout time.Duration
	// Root is the top node (default "dubbo", so nodes live under /dubbo).
	Root string
	// Username and Password, when set, are sent as digest credentials and
	// every node this registry creates (the root, service and category
	// nodes as well as its ephemeral nodes) gets the ACL "full rights for
	// this digest identity, read for anyone" (unless ACL is set): Dubbo's
	// tools can list providers without credentials, but a client without
	// them cannot create, change or delete anything there. Existing nodes
	// whose ACL lets anyone change them are reported (Registry.Exposed).
	Username, Password string
	// PrivateRead drops the read-for-anyone entry from the default ACL
	// with credentials: only the digest identity can then list providers
	// (and read the tokens in their URLs); Dubbo's tools need the
	// credentials too.
	PrivateRead bool
	// ACL is the ACL of created nodes (default: world-open without
	// credentials; with them, see Username).
	ACL []zk.ACL
	// CacheFile is the provider cache file (default
	// registry.DefaultCachePath(Application, address)). NoCacheFile keeps
	// the cache in memory only.
	CacheFile   string
	NoCacheFile bool
	// RetryMin and RetryMax bound the backoff of failed registry
	// operations (defaults 200 ms and 5 s).
	RetryMin, RetryMax time.Duration
	// Resync is how often registrations are re-asserted even when nothing
	// happened, restoring nodes someone deleted (default 30 s).
	Resync time.Duration
	// WatchdogTimeout: when the client has had no session for this long
	// while servers accept connections (ZooKeeper lost its data and refuses
	// the old session forever), the connection is dropped and dialled
	// afresh (default max(2 × SessionTimeout, 10 s)).
	WatchdogTimeout time.Duration
	// EmptyGrace: an empty provider list that replaces a non-empty one is
	// held back for this long after the session was established, or after
	// a reconnect or a new session following a loss plus about 2 s (the
	// time go-zookeeper's reconnect pauses give a provider cut off by the
	// same partition to re-register), because providers whose own sessions
	// expired meanwhile may not have re-registered yet (default
	// SessionTimeout).
	EmptyGrace time.Duration
	// RegisterWait bounds how long Register and Unregister wait for their
	// first attempt before they leave the work to the background (default
	// min(SessionTimeout, 3 s)).
	RegisterWait time.Duration
	// MaxChildren bounds the children of a providers or routers node the
	// registry lists (default 10000): a node with more is not listed but
	// reported (a warning and Stats.Oversized) and skipped, the listener
	// keeping its last list, and its child count is looked at again with a
	// backoff. The count comes from the node's Stat, before any listing.
	MaxChildren int
	// MaxBufferSize bounds one ZooKeeper response the client reads
	// (go-zookeeper's WithMaxBufferSize; default 16 MiB, room for
	// MaxChildren provider URLs of about 1.6 KB each). A node whose listing
	// would be larger is skipped as for MaxChildren; the first time its
	// names turn out longer than estimated, go-zookeeper drops the
	// connection once (Stats.OversizedResponses) and reconnects to the
	// same session, and the node is skipped from then on.
	MaxBufferSize int
	// Logger receives warnings and session changes (default none).
	Logger *zap.Logger
}

// DefaultOptions returns the defaults of every field, those derived from
// the session timeout worked out for DefaultSessionTimeout (Logger nil:
// none; CacheFile empty: registry.DefaultCachePath).
func DefaultOptions() Options {
	o := Options{
		SessionTimeout: DefaultSessionTimeout,
		Root:           DefaultRoot,
		RetryMin:       DefaultRetryMin,
		RetryMax:       DefaultRetryMax,
		Resync:         DefaultResync,
		MaxChildren:    DefaultMaxChildren,
		MaxBufferSize:  DefaultMaxBufferSize,
	}
	o.derive()
	return o
}

// derive sets the zero defaults that follow from SessionTimeout.
func (o *Options) derive() {
	if o.WatchdogTimeout == 0 {
		o.WatchdogTimeout = max(2*o.SessionTimeout, 10*time.Second)
	}
	if o.EmptyGrace == 0 {
		o.EmptyGrace = o.SessionTimeout
	}
	if o.RegisterWait == 0 {
		o.RegisterWait = min(o.SessionTimeout, 3*time.Second)
	}
}

// Validate returns an error naming the first invalid field: a negative
// count or duration, a Root of more than one path element, or a Username
// without a Password (or the other way round).
func (o *Options) Validate() error {
	if err := optcheck.NonNegative("zookeeper registry",
		optcheck.Field{Name: "SessionTimeout", Value: int64(o.SessionTimeout), Default: DefaultSessionTimeout},
		optcheck.Field{Name: "RetryMin", Value: int64(o.RetryMin), Default: DefaultRetryMin},
		optcheck.Field{Name: "RetryMax", Value: int64(o.RetryMax), Default: DefaultRetryMax},
		optcheck.Field{Name: "Resync", Value: int64(o.Resync), Default: DefaultResync},
		optcheck.Field{Name: "WatchdogTimeout", Value: int64(o.WatchdogTimeout), Default: optcheck.Said("the default, twice SessionTimeout and at least 10s")},
		optcheck.Field{Name: "EmptyGrace", Value: int64(o.EmptyGrace), Default: optcheck.Said("the default, SessionTimeout")},
		optcheck.Field{Name: "RegisterWait", Value: int64(o.RegisterWait), Default: optcheck.Said("the default, SessionTimeout and at most 3s")},
		optcheck.Field{Name: "MaxChildren", Value: int64(o.MaxChildren), Default: DefaultMaxChildren},
		optcheck.Field{Name: "MaxBufferSize", Value: int64(o.MaxBufferSize), Default: DefaultMaxBufferSize},
	); err != nil {
		return err
	}
	switch {
	case o.MaxBufferSize > 0 && o.MaxBufferSize < MinMaxBufferSize:
		return fmt.Errorf("zookeeper registry: MaxBufferSize %d is below %d, too small for ZooKeeper's own answers (want 0 for the default %d, or at least %d)",
			o.MaxBufferSize, MinMaxBufferSize, DefaultMaxBufferSize, MinMaxBufferSize)
	case strings.Contains(strings.Trim(o.Root, "/"), "/"):
		return fmt.Errorf("zookeeper registry: root %q must be one path element", o.Root)
	case (o.Username == "") != (o.Password == ""):
		return errors.New("zookeeper registry: username and password must be set together")
	}
	return nil
}

// fill sets unset fields from the address parameters, validates, and
// sets the rest to their defaults.
func (o *Options) fill(params url.Values) error {
	if o.Application == "" {
		o.Application = params.Get("application")
	}
	if o.SessionTimeout == 0 {
		if s := params.Get("session"); s != "" {
			d, err := parseDuration(s)
			if err != nil {
				return fmt.Errorf("zookeeper registry: session=%q: %w", s, err)
			}
			o.SessionTimeout = d
		}
	}
	if o.Root == "" {
		o.Root = params.Get("root")
	}
	if o.Root == "" {
		o.Root = params.Get("group")
	}
	o.Root = strings.Trim(o.Root, "/")
	if o.CacheFile == "" {
		o.CacheFile = params.Get("file")
	}
	if err := o.limitsFrom(params.Get); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	d := DefaultOptions()
	if o.SessionTimeout == 0 {
		o.SessionTimeout = d.SessionTimeout
	}
	if o.Root == "" {
		o.Root = d.Root
	}
	if o.RetryMin == 0 {
		o.RetryMin = d.RetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = d.RetryMax
	}
	o.RetryMax = max(o.RetryMax, o.RetryMin)
	if o.Resync == 0 {
		o.Resync = d.Resync
	}
	o.derive()
	if o.MaxChildren == 0 {
		o.MaxChildren = d.MaxChildren
	}
	if o.MaxBufferSize == 0 {
		o.MaxBufferSize = d.MaxBufferSize
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return nil
}

// Params are the settings Open takes from registry.Options.Params, by
// the names the address takes them as.
var Params = []string{"max_children", "max_buffer_size", "private_read", "root"}

// limitsFrom sets MaxChildren, MaxBufferSize and PrivateRead, where
// unset, from the parameters of those names (see Params).
func (o *Options) limitsFrom(get func(string) string) error {
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_children", &o.MaxChildren}, {"max_buffer_size", &o.MaxBufferSize}} {
		if s := get(f.name); s != "" && *f.v == 0 {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("zookeeper registry: %s=%q: want a whole number", f.name, s)
			}
			*f.v = n
		}
	}
	if s := get("private_read"); s != "" && !o.PrivateRead {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("zookeeper registry: private_read=%q: want true or false", s)
		}
		o.PrivateRead = b
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}

// Address is a parsed registry address.
type Address struct {
	// Servers are host:port pairs, in the order given.
	Servers []string
	// Username and Password come from user:password@ in the address.
	Username, Password string
	// Params are the query parameters (session, root, file, application,
	// backup, ...).
	Params url.Values
}

// ParseAddress parses a registry address: zookeeper://h1:2181,h2:2181,h3:2181
// with optional user:password@ before the hosts and parameters after '?'
// (session=ms or a Go duration, root, file, application, max_children,
// max_buffer_size (bytes), private_read=true|false, and backup=more hosts,
// as Dubbo writes it). The scheme may be left out; a host without a
// port gets 2181.
func ParseAddress(address string) (Address, error) {
	var a Address
	rest := strings.TrimSpace(address)
	if scheme, after, ok := strings.Cut(rest, "://"); ok {
		if scheme != "zookeeper" && scheme != "zk" {
			return a, fmt.Errorf("zookeeper registry: address %q: unknown scheme %q (known: zk, zookeeper)", address, scheme)
		}
		rest = after
	}
	hosts, query, _ := strings.Cut(rest, "?")
	hosts, _, _ = strings.Cut(hosts, "/")
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user := hosts[:i]
		hosts = hosts[i+1:]
		u, p, ok := strings.Cut(user, ":")
		if !ok || u == "" {
			return a, fmt.Errorf("zookeeper registry: address %q: credentials must be user:password", address)
		}
		a.Username, a.Password = u, p
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return a, fmt.Errorf("zookeeper registry: address %q: %w", address, err)
	}
	a.Params = params
	all := hosts
	if b := params.Get("backup"); b != "" {
		all += "," + b
	}
	for h := range strings.SplitSeq(all, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if !strings.Contains(err.Error(), "missing port") {
				return a, fmt.Errorf("zookeeper registry: address %q: host %q: %w", address, h, err)
			}
			host, port = h, strconv.Itoa(DefaultPort)
		}
		if err := checkHostPort(host, port); err != nil {
			return a, fmt.Errorf("zookeeper registry: address %q: server %q: %w", address, h, err)
		}
		a.Servers = append(a.Servers, net.JoinHostPort(host, port))
	}
	if len(a.Servers) == 0 {
		return a, fmt.Errorf("zookeeper registry: address %q names no server; %s", address, addressExample)
	}
	return a, nil
}

// addressExample is what an address that names no server, or a bad one, is
// told to look like.
const addressExample = "write HOST:PORT, such as zookeeper://127.0.0.1:2181 " +
	"(an ensemble: zookeeper://h1:2181,h2:2181,h3:2181)"

// checkHostPort says what is wrong with one server of an address.
func checkHostPort(host, port string) error {
	if host == "" {
		return fmt.Errorf("no host before the port; %s", addressExample)
	}
	n, err := strconv.Atoi(port)
	switch {
	case err != nil && port == "":
		return fmt.Errorf("no port after the colon (leave out the colon for the default port %d); %s", DefaultPort, addressExample)
	case err != nil:
		return fmt.Errorf("port %q is not a number; %s", port, addressExample)
	case n < 1 || n > 65535:
		return fmt.Errorf("port %d is out of range (1-65535; ZooKeeper's is usually %d)", n, DefaultPort)
	}
	return nil
}

// Open is the registry.Factory of the zookeeper and zk schemes: New with
// the application's generic settings (cache file "-" means none) and o.Params (names in Params; they win over the
// address's, except root, which must agree with the address's root
// parameter when both are given; another name is an error). Every
// address form ParseAddress accepts works, its parameters included.
func Open(address string, o registry.Options) (registry.Registry, error) {
	zo := Options{
		Application:    o.Application,
		SessionTimeout: o.SessionTimeout,
		Username:       o.Username,
		Password:       o.Password,
		Logger:         o.Logger,
	}
	for _, k := range slices.Sorted(maps.Keys(o.Params)) {
		if !slices.Contains(Params, k) {
			return nil, fmt.Errorf("zookeeper registry: unknown setting %q (known: %s)", k, strings.Join(Params, ", "))
		}
	}
	if err := zo.limitsFrom(func(k string) string { return o.Params[k] }); err != nil {
		return nil, err
	}
	if root := o.Params["root"]; root != "" {
		if err := RootAgrees(address, root); err != nil {
			return nil, err
		}
		zo.Root = root
	}
	switch o.CacheFile {
	case "":
	case "-":
		zo.NoCacheFile = true
	default:
		zo.CacheFile = o.CacheFile
	}
	return New(address, zo)
}

// RootAgrees returns an error when address sets a root (its root
// parameter, or Dubbo's group) other than root; "/" around either does
// not count. An address without one agrees with any root.
func RootAgrees(address, root string) error {
	a, err := ParseAddress(address)
	if err != nil {
		return err
	}
	for _, k := range []string{"root", "group"} {
		if v := a.Params.Get(k); v != "" {
			if strings.Trim(v, "/") != strings.Trim(root, "/") {
				return fmt.Errorf("zookeeper registry: root %q disagrees with the address's %s=%s (give it once, or the same)", root, k, v)
			}
			return nil
		}
	}
	return nil
}
