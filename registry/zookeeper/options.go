package zookeeper

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/registry"
)

// Defaults for Options.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultRoot           = "dubbo"
	DefaultRetryMin       = 200 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
	DefaultResync         = 30 * time.Second
	DefaultMaxChildren    = 10000
	DefaultMaxBufferSize  = 4 << 20
	DefaultPort           = 2181
)

// Options configure a Registry. The zero value of every field means its
// default; New fills unset fields from the address parameters first.
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
	// held back for this long after the session was established or
	// re-established (a reconnect), because providers whose own sessions
	// expired meanwhile may not have re-registered yet (default
	// SessionTimeout).
	EmptyGrace time.Duration
	// RegisterWait bounds how long Register and Unregister wait for their
	// first attempt before they leave the work to the background (default
	// min(SessionTimeout, 3 s)).
	RegisterWait time.Duration
	// MaxChildren caps the providers read per service; extra children are
	// ignored with a warning (default 10000).
	MaxChildren int
	// MaxBufferSize caps one ZooKeeper response (default 4 MiB).
	MaxBufferSize int
	// Logger receives warnings and session changes (default none).
	Logger *zap.Logger
}

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
		o.Root = strings.Trim(params.Get("root"), "/")
	}
	if o.Root == "" {
		o.Root = strings.Trim(params.Get("group"), "/")
	}
	if o.CacheFile == "" {
		o.CacheFile = params.Get("file")
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.SessionTimeout < 0 {
		return fmt.Errorf("zookeeper registry: negative session timeout %v", o.SessionTimeout)
	}
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if strings.Contains(o.Root, "/") {
		return fmt.Errorf("zookeeper registry: root %q must be one path element", o.Root)
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = o.RetryMin
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.WatchdogTimeout <= 0 {
		o.WatchdogTimeout = max(2*o.SessionTimeout, 10*time.Second)
	}
	if o.EmptyGrace <= 0 {
		o.EmptyGrace = o.SessionTimeout
	}
	if o.RegisterWait <= 0 {
		o.RegisterWait = min(o.SessionTimeout, 3*time.Second)
	}
	if o.MaxChildren <= 0 {
		o.MaxChildren = DefaultMaxChildren
	}
	if o.MaxBufferSize <= 0 {
		o.MaxBufferSize = DefaultMaxBufferSize
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if (o.Username == "") != (o.Password == "") {
		return errors.New("zookeeper registry: username and password must be set together")
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
// (session=ms or a Go duration, root, file, application, and backup=more
// hosts, as Dubbo writes it). The scheme may be left out; a host without a
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
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 || host == "" {
			return a, fmt.Errorf("zookeeper registry: address %q: bad host %q", address, h)
		}
		a.Servers = append(a.Servers, net.JoinHostPort(host, port))
	}
	if len(a.Servers) == 0 {
		return a, fmt.Errorf("zookeeper registry: address %q names no server", address)
	}
	return a, nil
}

// Open is the registry.Factory of the zookeeper and zk schemes: New with
// the application's generic settings (cache file "-" means none). Every
// address form ParseAddress accepts works, its parameters included.
func Open(address string, o registry.Options) (registry.Registry, error) {
	zo := Options{
		Application:    o.Application,
		SessionTimeout: o.SessionTimeout,
		Username:       o.Username,
		Password:       o.Password,
		Logger:         o.Logger,
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
