package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
	"github.com/minidubbo/minidubbo/serialize"
)

// zookeeperSchemes are the address schemes of ZooKeeper registries, the
// only ones a registry's zookeeper section applies to.
var zookeeperSchemes = []string{"zookeeper", "zk"}

// Config is the whole configuration of one application: what it provides,
// what it refers to, and where it registers. Build it in Go or load it from
// YAML with Load or Parse; either way Validate fills defaults and checks it.
type Config struct {
	Application ApplicationConfig `yaml:"application"`
	// Registries by id. A service or reference with no registries listed
	// uses all of them.
	Registries map[string]RegistryConfig `yaml:"registries"`
	// Protocols by id. When empty, one "dubbo" protocol on a free port.
	Protocols map[string]ProtocolConfig `yaml:"protocols"`
	// Services this application provides, by id.
	Services map[string]ServiceConfig `yaml:"services"`
	// References to services this application calls, by id.
	References map[string]ReferenceConfig `yaml:"references"`
	// Consumer holds defaults for every reference (TLS).
	Consumer ConsumerConfig `yaml:"consumer"`
	Shutdown ShutdownConfig `yaml:"shutdown"`
	// Monitor sends call counts to the monitor service and serves them
	// to Prometheus.
	Monitor MonitorConfig `yaml:"monitor"`
	// Logging sets up the default logger (warnings and errors to stderr).
	Logging LoggingConfig `yaml:"logging"`
}

// MonitorConfig configures reporting call counts. The application counts
// every call either way (Application.Monitor); it reports them when
// Address, Interval or Registries is set.
type MonitorConfig struct {
	// Address of the monitor service to report to directly (host:port or
	// dubbo://host:port, several comma-separated). Empty: find it through
	// the registries, as any other service.
	Address string `yaml:"address"`
	// Registries ids to find the monitor service in (default: all).
	Registries []string `yaml:"registries"`
	// Interval between reports (default monitor.DefaultInterval, 60s; at
	// least monitor.MinInterval, 1s).
	Interval time.Duration `yaml:"interval"`
	// BufferReports and BufferBytes bound the reports kept while the
	// monitor is away (defaults monitor.DefaultBufferReports and
	// DefaultBufferBytes, 60 and 8 MiB); the oldest are dropped.
	BufferReports int `yaml:"buffer_reports"`
	BufferBytes   int `yaml:"buffer_bytes"`
	// Metrics, when set, is the host:port on which the application serves
	// its counts to Prometheus at /metrics.
	Metrics string `yaml:"metrics"`
}

// Reporting reports whether the configuration asks for reports.
func (m MonitorConfig) Reporting() bool {
	return m.Address != "" || m.Interval != 0 || len(m.Registries) > 0
}

// ApplicationConfig names the application.
type ApplicationConfig struct {
	// Name appears in registered URLs and names the provider cache file.
	Name string `yaml:"name"`
	// UnknownFields is what decoding a struct argument or result does with
	// a key the Go struct has no field for: "reject" (default; the call
	// fails naming the key, so a wrong struct is not read as zero values)
	// or "ignore" (for rolling upgrades that add fields).
	UnknownFields string `yaml:"unknown_fields"`
}

// RegistryConfig is one registry.
type RegistryConfig struct {
	// Address chooses the registry by its scheme: zookeeper:// or zk://
	// (host:port[,host:port...], with every form registry/zookeeper
	// accepts; no scheme means zookeeper), memory://name, or the scheme of
	// a registry added with WithRegistryFactory.
	// Registries of one Application with the same memory name are one
	// in-process registry; different names are separate.
	Address string `yaml:"address"`
	// Timeout bounds connecting and each registry operation (default
	// DefaultRegistryTimeout, 5s).
	Timeout time.Duration `yaml:"timeout"`
	// Check makes Export wait up to Timeout for the registry to answer and
	// fail, naming the registry, when it does not (default true, as
	// Dubbo's register check). false registers in the background as soon
	// as the registry answers.
	Check *bool `yaml:"check"`
	// CacheFile is where provider lists are kept on disk; empty means the
	// default under the user's cache directory, "-" turns the cache off.
	CacheFile string `yaml:"cache_file"`
	// ZooKeeper holds the settings only a ZooKeeper registry has; it must
	// stay empty for an address of another scheme.
	ZooKeeper ZooKeeperConfig `yaml:"zookeeper"`
}

// ZooKeeperConfig is the section of a registry with a zookeeper:// or
// zk:// address (or none) for the settings only ZooKeeper has:
//
//	registries:
//	  zk:
//	    address: zookeeper://10.0.0.1:2181,10.0.0.2:2181
//	    zookeeper: {session_timeout: 10s, username: shop, password: secret}
//
// The address may carry them too, as Dubbo writes it
// (zookeeper://shop:secret@10.0.0.1:2181?session=10s); a setting here
// wins over the address's.
type ZooKeeperConfig struct {
	// SessionTimeout is the ZooKeeper session timeout (default: the
	// address's session parameter, else zookeeper.DefaultSessionTimeout,
	// 10s). The server clamps it to [2, 20] × its tickTime.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// Username and Password are digest credentials, both or neither: the
	// session authenticates with them and the nodes the registry creates
	// get a digest ACL for that identity.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// PrivateRead, with credentials, makes the nodes the registry creates
	// readable by that identity only (default: anyone may read them, as
	// Dubbo's tools do, but only the identity may change them).
	PrivateRead bool `yaml:"private_read"`
	// MaxChildren bounds the children of a providers node the registry
	// lists (default 10000): a node with more is reported and skipped,
	// the last list kept.
	MaxChildren int `yaml:"max_children"`
	// MaxBufferSize bounds one ZooKeeper response, in bytes (default 16
	// MiB, at least 64 KiB): a providers node whose listing would not fit
	// is reported and skipped like one over max_children.
	MaxBufferSize int `yaml:"max_buffer_size"`
	// Root is the top node the registry's nodes live under (default
	// "dubbo": /dubbo/{interface}/providers/...). The address may give it
	// as its root parameter instead; giving both, they must agree.
	Root string `yaml:"root"`
}

// params returns the settings a ZooKeeper registry takes by name
// (registry.Options.Params): those that are set.
func (z ZooKeeperConfig) params() map[string]string {
	p := map[string]string{}
	if z.PrivateRead {
		p["private_read"] = "true"
	}
	if z.MaxChildren != 0 {
		p["max_children"] = strconv.Itoa(z.MaxChildren)
	}
	if z.MaxBufferSize != 0 {
		p["max_buffer_size"] = strconv.Itoa(z.MaxBufferSize)
	}
	if z.Root != "" {
		p["root"] = z.Root
	}
	return p
}

// isZero reports whether no ZooKeeper setting is made.
func (z ZooKeeperConfig) isZero() bool { return z == ZooKeeperConfig{} }

// ProtocolConfig is one protocol server.
type ProtocolConfig struct {
	// Name is the protocol (default DefaultProtocol, dubbo, the one built
	// in), or one added with WithProtocol. It is the scheme of the URLs
	// the protocol's services are registered with.
	Name string `yaml:"name"`
	// Host to listen on and to advertise (default 127.0.0.1).
	Host string `yaml:"host"`
	// Port to listen on; 0 picks a free port.
	Port int `yaml:"port"`
	// Serialization is the default body encoding: msgpack (the default,
	// DefaultSerialization), json, or one added with WithSerializer or
	// WithProtocolOptions.
	Serialization string `yaml:"serialization"`
	// RegisterAddress, when set, is the host:port written to the registry
	// instead of the listen address: for a provider behind a port mapping
	// (a container, NAT) or a TCP proxy (Dubbo's DUBBO_IP_TO_REGISTRY and
	// DUBBO_PORT_TO_REGISTRY).
	RegisterAddress string `yaml:"register_address"`
	// TLS, when set, makes the port speak TLS (mutual TLS with a client
	// CA); see ServerTLSConfig.
	TLS *ServerTLSConfig `yaml:"tls"`

	// The keys below are limits of the dubbo protocol (the fields of
	// dubbo.Options of the same names), for an entry whose name is dubbo
	// only. The application makes one dubbo protocol for all its dubbo
	// entries, so a limit set in one entry applies to all their ports
	// and to every reference's connections; entries that both set one
	// must give the same value. A limit set here wins over the one of
	// WithProtocolOptions; 0 or unset keeps that one, else the default.

	// MaxMemory bounds, in bytes, what the calls read and the answers not
	// yet written of all the dubbo ports hold together: one budget they
	// share (default 256 MiB, or twice max_payload when more). At least
	// max_payload plus the 16-byte frame header.
	MaxMemory int `yaml:"max_memory"`
	// MaxMemoryPerIP bounds, in bytes, what the calls in progress from
	// the consumers at one IP address hold of max_memory (default an
	// eighth of max_memory; max_memory or more: no such bound).
	MaxMemoryPerIP int `yaml:"max_memory_per_ip"`
	// MaxReplyMemory bounds, in bytes, what the answers in progress on
	// all the application's referred connections hold together (the
	// consumer's budget; default 256 MiB, or twice max_payload when
	// more). At least max_payload plus the 16-byte frame header.
	MaxReplyMemory int `yaml:"max_reply_memory"`
	// FrameTimeout bounds the time from a frame's first byte to its last
	// on every connection, both sides (default 5s): a peer that starts a
	// frame and stalls is cut off.
	FrameTimeout time.Duration `yaml:"frame_timeout"`
	// MaxPayload bounds every frame body, in bytes, in both directions
	// (default 8 MiB): a larger request fails before it is sent, a larger
	// answer reaches the caller as status.ErrPayloadTooLarge.
	MaxPayload int `yaml:"max_payload"`
}

// ServiceConfig is one provided service.
type ServiceConfig struct {
	// Interface is the name consumers refer the service by, such as
	// demo.Greeter (required).
	Interface string `yaml:"interface"`
	// Version and Group tell apart providers of one interface (Dubbo's
	// version and group, empty by default): a reference calls only the
	// providers whose version and group are its own.
	Version string `yaml:"version"`
	Group   string `yaml:"group"`
	// Protocol id from Config.Protocols (default: the only one, or "dubbo").
	Protocol string `yaml:"protocol"`
	// Registries ids (default: all).
	Registries []string `yaml:"registries"`
	// Weight for load balancing (default protocol.DefaultWeight, 100; 0
	// takes no traffic; at most protocol.MaxWeight).
	Weight *int `yaml:"weight"`
	// Timeout advertised to consumers (default protocol.DefaultTimeout,
	// 1s).
	Timeout time.Duration `yaml:"timeout"`
	// Warmup is the period over which the weight grows (default
	// protocol.DefaultWarmup, 10m).
	Warmup *time.Duration `yaml:"warmup"`
	// Token: "" for none, "true" for a random per-process token, or a
	// fixed secret.
	Token string `yaml:"token"`
	// Executes bounds concurrent calls of this service on this provider
	// (0: no bound beyond the protocol's dispatch limit).
	Executes int `yaml:"executes"`
	// Tag routes tagged calls to this provider.
	Tag string `yaml:"tag"`
	// Filters names filters added with WithFilter, run on every call of
	// the service after the built-in ones, in order.
	Filters []string `yaml:"filters"`
}

// ReferenceConfig is one referenced service.
type ReferenceConfig struct {
	// Interface is the service's name in the registry, as the providers
	// export it (ServiceConfig.Interface; default: the reference's id).
	Interface string `yaml:"interface"`
	// Version and Group choose the providers called: those of the same
	// version and group; "*" (registry.Any) takes any version or group,
	// and Group may list several ("eu,us").
	Version string `yaml:"version"`
	Group   string `yaml:"group"`
	// URL, when set, calls these providers directly (comma-separated
	// dubbo://host:port URLs or host:port addresses), without a registry.
	URL string `yaml:"url"`
	// Registries ids (default: all).
	Registries []string `yaml:"registries"`
	// LoadBalance name (default loadbalance.Default, random).
	LoadBalance string `yaml:"loadbalance"`
	// Cluster fault-tolerance strategy name (default
	// cluster.DefaultStrategy, failover).
	Cluster string `yaml:"cluster"`
	// Retries after the first try for failover (default
	// cluster.DefaultRetries, 2; 0: none).
	Retries *int `yaml:"retries"`
	// Timeout bounds each call of the reference (default: the timeout
	// the provider advertises, else 1s). A sooner context deadline ends the
	// call first; a method's own timeout (Methods) replaces it for that
	// method. When set, it beats every timeout the provider advertises,
	// per-method ones included. See "Errors and timeouts" in the README
	// for the whole order; a call that runs out gets a
	// *status.TimeoutError naming the setting.
	Timeout time.Duration `yaml:"timeout"`
	// timeoutDefaulted records that Validate filled Timeout in, so that
	// timeout errors say "default timeout" rather than "reference timeout".
	timeoutDefaulted bool
	// Check makes Refer fail when no provider is known, or when every
	// known one is refused for its TLS (default false).
	Check bool `yaml:"check"`
	// Contract is what Refer does when the stub does not fit the method
	// signatures the providers publish (a missing method, another number
	// of arguments, an argument or reply of another kind): "fail"
	// (default), "warn" (log and go on, for rolling upgrades) or "off".
	Contract string `yaml:"contract"`
	// EmptyProtection (default true) keeps calling the providers of the
	// last list whose connections are healthy when the registry says the
	// list is empty, until those connections fail or a non-empty list
	// comes (logged and counted); false applies an empty list at once.
	// See registry.DirectoryOptions.NoEmptyProtection.
	EmptyProtection *bool `yaml:"empty_protection"`
	// Methods holds per-method overrides by method name; each must name a
	// method of the stub given to Refer.
	Methods map[string]MethodConfig `yaml:"methods"`
	// Routers narrow the providers of each call, in order, after the
	// built-in tag router: each is a condition rule ("method = find* =>
	// host = 127.0.0.2") or the name of a router added with WithRouter.
	Routers []string `yaml:"routers"`
	// Forks is how many providers the forking cluster calls at once
	// (default cluster.DefaultForks, 2).
	Forks int `yaml:"forks"`
	// Failback sets the failback cluster's background retries.
	Failback FailbackConfig `yaml:"failback"`
	// Hash sets the consistenthash load balancer's key and ring.
	Hash HashConfig `yaml:"hash"`
	// CallFilters names filters added with WithFilter that run once per
	// call, above the cluster; AttemptFilters, once per attempt on a
	// provider, below it.
	CallFilters    []string `yaml:"call_filters"`
	AttemptFilters []string `yaml:"attempt_filters"`
	// TLS, when set, makes the reference's connections speak TLS, instead
	// of Consumer.TLS; see ClientTLSConfig.
	TLS *ClientTLSConfig `yaml:"tls"`
}

// FailbackConfig sets the background retries of the failback cluster.
// Zero values mean the cluster package's defaults (cluster.DefaultOptions).
type FailbackConfig struct {
	// Retries is how many times a failed call is retried (default
	// cluster.DefaultFailbackRetries, 3).
	Retries int `yaml:"retries"`
	// Queue bounds the calls waiting for a retry (default
	// cluster.DefaultFailbackQueue, 100).
	Queue int `yaml:"queue"`
	// Backoff is the delay before the first retry, doubled for each
	// further one (default cluster.DefaultFailbackBackoff, 5s).
	Backoff time.Duration `yaml:"backoff"`
	// Timeout bounds each retry (default protocol.DefaultTimeout, 1s).
	Timeout time.Duration `yaml:"timeout"`
}

// HashConfig sets the consistenthash load balancer. It travels in the
// consumer URL as Dubbo's hash.nodes, hash.arguments and hash.attachment
// parameters. Zero values mean the balancer's defaults.
type HashConfig struct {
	// Nodes is the number of ring points per provider (default
	// loadbalance.DefaultVirtualNodes, 160).
	Nodes int `yaml:"nodes"`
	// Arguments are the indexes of the arguments that form the key
	// (default [0]).
	Arguments []int `yaml:"arguments"`
	// Attachment names an attachment whose value is the key when the call
	// carries it (for example the caller's address).
	Attachment string `yaml:"attachment"`
}

// MethodConfig overrides reference settings for one method.
type MethodConfig struct {
	// Timeout, when set, bounds each call of the method instead of the
	// reference's Timeout (a sooner context deadline still comes first).
	Timeout     time.Duration `yaml:"timeout"`
	Retries     *int          `yaml:"retries"`
	LoadBalance string        `yaml:"loadbalance"`
}

// ShutdownConfig bounds graceful shutdown.
type ShutdownConfig struct {
	// Timeout bounds the whole shutdown (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// Wait is how long a provider keeps serving after it unregistered and
	// told its consumers it is going, before refusing new calls (default 0:
	// consumers are told over the connection at once).
	Wait time.Duration `yaml:"wait"`
}

// Defaults used by Validate. Those of config's own settings are declared
// here; those of the layers below are theirs, named here only for
// convenience (see "Options and defaults" in the README).
const (
	DefaultRegistryTimeout = 5 * time.Second
	// DefaultSessionTimeout is the session timeout of a ZooKeeper registry
	// whose zookeeper.session_timeout and address leave it unset (the
	// registry applies it).
	DefaultSessionTimeout  = zookeeper.DefaultSessionTimeout
	DefaultRetries         = cluster.DefaultRetries
	DefaultShutdownTimeout = 10 * time.Second
	DefaultSerialization   = serialize.Msgpack
	DefaultHost            = "127.0.0.1"
)

// Load reads and validates a YAML configuration file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads YAML configuration from r and validates it. An unknown key is
// an error, so a typo does not silently fall back to a default; errors
// name the key's YAML path and line, suggest the nearest known key, and
// say that durations need a unit (2s, not 2).
func Parse(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if msgs := checkYAML(&doc); len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate fills defaults and checks every field; the error names the key
// and, for names, the allowed values. Known names are the built-in ones
// plus those the caller passes (for user-registered load balancers and
// cluster strategies); Validate on its own accepts any non-empty name and
// leaves name checks to New, which knows every table.
func (c *Config) Validate() error {
	return c.validate(known{})
}

// known holds the names in an application's tables; a nil list accepts
// any name.
type known struct {
	loadBalances, clusters, registries, protocols, serializations, filters, routers []string
	// dubbo holds the dubbo protocol's options given in Go, which the
	// limits of the protocols entries are checked against (nil: none).
	dubbo *dubboSettings
}

func (c *Config) validate(k known) error {
	loadBalances, clusters := k.loadBalances, k.clusters
	var errs []error
	bad := func(format string, args ...any) {
		err := fmt.Errorf(format, args...)
		errs = append(errs, &KeyError{Key: keyOf(err.Error()), Err: fmt.Errorf("config: %w", err)})
	}
	if c.Application.Name == "" {
		c.Application.Name = "minidubbo"
	}
	if c.Application.UnknownFields == "" {
		c.Application.UnknownFields = "reject"
	}
	if uf := []string{"reject", "ignore"}; !slices.Contains(uf, c.Application.UnknownFields) {
		bad("application.unknown_fields %q: unknown%s (known: reject, ignore)", c.Application.UnknownFields, suggest(c.Application.UnknownFields, uf))
	}
	for id, r := range c.Registries {
		key := "registries." + id
		switch scheme := registry.Scheme(r.Address); {
		case r.Address == "":
			bad("%s.address is empty (want zookeeper://host:port[,host:port...] or memory://name)", key)
		case k.registries != nil && !slices.Contains(k.registries, scheme):
			bad("%s.address %q: unknown scheme %q%s (known: %s)", key, r.Address, scheme, suggest(scheme, k.registries), strings.Join(k.registries, ", "))
		case slices.Contains(zookeeperSchemes, scheme):
			// Read as registry/zookeeper reads it, so a bad one fails here
			// rather than at the first Export or Refer.
			if _, err := zookeeper.ParseAddress(r.Address); err != nil {
				bad("%s.address: %w", key, err)
			}
		}
		if r.Timeout < 0 {
			bad("%s.timeout %v: must not be negative", key, r.Timeout)
		}
		if r.Timeout == 0 {
			r.Timeout = DefaultRegistryTimeout
		}
		z := r.ZooKeeper
		if scheme := registry.Scheme(r.Address); r.Address != "" && !z.isZero() && !slices.Contains(zookeeperSchemes, scheme) {
			bad("%s.zookeeper: ZooKeeper settings for a %s:// address (they apply to %s:// addresses only)", key, scheme, strings.Join(zookeeperSchemes, ":// and "))
		}
		if z.SessionTimeout < 0 {
			bad("%s.zookeeper.session_timeout %v: must not be negative", key, z.SessionTimeout)
		}
		if (z.Username == "") != (z.Password == "") {
			bad("%s.zookeeper: username and password go together", key)
		}
		if z.MaxChildren < 0 {
			bad("%s.zookeeper.max_children %d: must not be negative", key, z.MaxChildren)
		}
		if z.MaxBufferSize < 0 || (z.MaxBufferSize > 0 && z.MaxBufferSize < zookeeper.MinMaxBufferSize) {
			bad("%s.zookeeper.max_buffer_size %d: must be 0 (the default, %d) or at least %d", key, z.MaxBufferSize, zookeeper.DefaultMaxBufferSize, zookeeper.MinMaxBufferSize)
		}
		if root := strings.Trim(z.Root, "/"); z.Root != "" && (root == "" || strings.Contains(root, "/")) {
			bad("%s.zookeeper.root %q: must be one path element, such as dubbo", key, z.Root)
		} else if z.Root != "" && slices.Contains(zookeeperSchemes, registry.Scheme(r.Address)) {
			if err := zookeeper.RootAgrees(r.Address, z.Root); err != nil {
				bad("%s.zookeeper.root: %w", key, err)
			}
		}
		c.Registries[id] = r
	}
	if len(c.Protocols) == 0 {
		c.Protocols = map[string]ProtocolConfig{DefaultProtocol: {}}
	}
	for id, p := range c.Protocols {
		key := "protocols." + id
		if p.Name == "" {
			p.Name = DefaultProtocol
		}
		if k.protocols != nil && !slices.Contains(k.protocols, p.Name) {
			bad("%s.name %q: unknown protocol%s (known: %s)", key, p.Name, suggest(p.Name, k.protocols), strings.Join(k.protocols, ", "))
		}
		if p.Host == "" {
			p.Host = DefaultHost
		}
		if p.Port < 0 || p.Port > 65535 {
			bad("%s.port %d: want 0 (any free port) to 65535", key, p.Port)
		}
		if p.Serialization == "" {
			p.Serialization = DefaultSerialization
		}
		if k.serializations != nil && !slices.Contains(k.serializations, p.Serialization) {
			bad("%s.serialization %q: unknown%s (known: %s)", key, p.Serialization, suggest(p.Serialization, k.serializations), strings.Join(k.serializations, ", "))
		}
		if p.RegisterAddress != "" {
			if _, _, err := splitRegisterAddress(p.RegisterAddress); err != nil {
				bad("%s.register_address %q: %w", key, p.RegisterAddress, err)
			}
		}
		c.Protocols[id] = p
	}
	errs = append(errs, c.checkDubboLimits(k.dubbo)...)
	checkFilters := func(key string, names []string) {
		for _, n := range names {
			switch {
			case n == "":
				bad("%s: empty filter name", key)
			case k.filters != nil && !slices.Contains(k.filters, n):
				if len(k.filters) == 0 {
					bad("%s: unknown filter %q (none is known: a name here must be added first with config.WithFilter(%q, f))", key, n, n)
				} else {
					bad("%s: unknown filter %q%s (known: %s)", key, n, suggest(n, k.filters), strings.Join(k.filters, ", "))
				}
			}
		}
	}
	checkRegs := func(key string, ids []string) {
		for _, id := range ids {
			if _, ok := c.Registries[id]; !ok {
				bad("%s.registries: unknown registry %q%s (known: %s)", key, id, suggest(id, sortedKeys(c.Registries)), strings.Join(sortedKeys(c.Registries), ", "))
			}
		}
	}
	for id, s := range c.Services {
		key := "services." + id
		if s.Interface == "" {
			bad("%s.interface is empty: name the service's interface, such as demo.Greeter", key)
		}
		if s.Protocol == "" {
			if len(c.Protocols) == 1 {
				s.Protocol = sortedKeys(c.Protocols)[0]
			} else {
				s.Protocol = DefaultProtocol
			}
		}
		if _, ok := c.Protocols[s.Protocol]; !ok {
			bad("%s.protocol: unknown protocol %q%s (known: %s)", key, s.Protocol, suggest(s.Protocol, sortedKeys(c.Protocols)), strings.Join(sortedKeys(c.Protocols), ", "))
		}
		checkRegs(key, s.Registries)
		if s.Weight != nil && *s.Weight < 0 {
			bad("%s.weight %d: must not be negative", key, *s.Weight)
		}
		if s.Weight != nil && *s.Weight > protocol.MaxWeight {
			bad("%s.weight %d: must be at most %d", key, *s.Weight, protocol.MaxWeight)
		}
		if s.Timeout < 0 {
			bad("%s.timeout %v: must not be negative", key, s.Timeout)
		}
		if s.Timeout == 0 {
			s.Timeout = protocol.DefaultTimeout
		}
		if s.Warmup != nil && *s.Warmup < 0 {
			bad("%s.warmup %v: must not be negative", key, *s.Warmup)
		}
		if s.Executes < 0 {
			bad("%s.executes %d: must not be negative", key, s.Executes)
		}
		checkFilters(key+".filters", s.Filters)
		c.Services[id] = s
	}
	for id, r := range c.References {
		key := "references." + id
		if r.Interface == "" {
			r.Interface = id
		}
		checkRegs(key, r.Registries)
		if r.URL == "" && len(c.Registries) == 0 {
			bad("%s: no url and no registries to find providers in", key)
		}
		if err := checkDirectURLs(r.URL); err != nil {
			bad("%s.url: %w", key, err)
		}
		if r.LoadBalance == "" {
			r.LoadBalance = loadbalance.Default
		}
		if r.Cluster == "" {
			r.Cluster = cluster.DefaultStrategy
		}
		if r.Contract == "" {
			r.Contract = ContractFail
		}
		if !slices.Contains(contractModes, r.Contract) {
			bad("%s.contract %q: unknown%s (known: %s)", key, r.Contract, suggest(r.Contract, contractModes), strings.Join(contractModes, ", "))
		}
		for i, rt := range r.Routers {
			if k.routers != nil && !strings.Contains(rt, "=>") && !slices.Contains(k.routers, rt) {
				if len(k.routers) == 0 {
					bad("%s.routers[%d]: %q is no condition rule (when => then) and no router (none is known: a name here must be added first with config.WithRouter(%q, f); a rule reads like \"method = find* => host = 10.0.0.2\")",
						key, i, rt, rt)
					continue
				}
				bad("%s.routers[%d]: %q is no condition rule (when => then) and no router%s (known: %s)",
					key, i, rt, suggest(rt, k.routers), strings.Join(k.routers, ", "))
			}
		}
		if loadBalances != nil && !slices.Contains(loadBalances, r.LoadBalance) {
			bad("%s.loadbalance: unknown %q%s (known: %s)", key, r.LoadBalance, suggest(r.LoadBalance, loadBalances), strings.Join(loadBalances, ", "))
		}
		if clusters != nil && !slices.Contains(clusters, r.Cluster) {
			bad("%s.cluster: unknown %q%s (known: %s)", key, r.Cluster, suggest(r.Cluster, clusters), strings.Join(clusters, ", "))
		}
		if r.Retries == nil {
			n := DefaultRetries
			r.Retries = &n
		} else if *r.Retries < 0 {
			bad("%s.retries %d: must not be negative", key, *r.Retries)
		}
		if r.Timeout < 0 {
			bad("%s.timeout %v: must not be negative", key, r.Timeout)
		}
		if r.Timeout == 0 {
			r.Timeout = protocol.DefaultTimeout
			r.timeoutDefaulted = true
		}
		checkFilters(key+".call_filters", r.CallFilters)
		checkFilters(key+".attempt_filters", r.AttemptFilters)
		if r.Forks < 0 {
			bad("%s.forks %d: must not be negative", key, r.Forks)
		}
		if f := r.Failback; f.Retries < 0 {
			bad("%s.failback.retries %d: must not be negative", key, f.Retries)
		}
		if f := r.Failback; f.Queue < 0 {
			bad("%s.failback.queue %d: must not be negative", key, f.Queue)
		}
		if f := r.Failback; f.Backoff < 0 {
			bad("%s.failback.backoff %v: must not be negative", key, f.Backoff)
		}
		if f := r.Failback; f.Timeout < 0 {
			bad("%s.failback.timeout %v: must not be negative", key, f.Timeout)
		}
		if r.Hash.Nodes < 0 {
			bad("%s.hash.nodes %d: must not be negative", key, r.Hash.Nodes)
		}
		for _, i := range r.Hash.Arguments {
			if i < 0 {
				bad("%s.hash.arguments: index %d must not be negative", key, i)
			}
		}
		for m, mc := range r.Methods {
			mkey := key + ".methods." + m
			if mc.Timeout < 0 {
				bad("%s.timeout %v: must not be negative", mkey, mc.Timeout)
			}
			if mc.Retries != nil && *mc.Retries < 0 {
				bad("%s.retries %d: must not be negative", mkey, *mc.Retries)
			}
			if mc.LoadBalance != "" && loadBalances != nil && !slices.Contains(loadBalances, mc.LoadBalance) {
				bad("%s.loadbalance: unknown %q%s (known: %s)", mkey, mc.LoadBalance, suggest(mc.LoadBalance, loadBalances), strings.Join(loadBalances, ", "))
			}
		}
		c.References[id] = r
	}
	if m := c.Monitor.Metrics; m != "" {
		if _, _, err := net.SplitHostPort(m); err != nil {
			bad("monitor.metrics %q: want host:port (%w)", m, err)
		}
	}
	if m := &c.Monitor; m.Reporting() {
		checkRegs("monitor", m.Registries)
		if err := checkDirectURLs(m.Address); err != nil {
			bad("monitor.address: %w", err)
		}
		switch {
		case m.Interval == 0:
			m.Interval = monitor.DefaultInterval
		case m.Interval < monitor.MinInterval:
			bad("monitor.interval %v: must be at least %v", m.Interval, monitor.MinInterval)
		}
		if m.Address == "" && len(c.Registries) == 0 {
			bad("monitor: no address and no registries to find the monitor service in")
		}
		if m.BufferReports < 0 {
			bad("monitor.buffer_reports %d: must not be negative", m.BufferReports)
		}
		if m.BufferBytes < 0 {
			bad("monitor.buffer_bytes %d: must not be negative", m.BufferBytes)
		}
	}
	c.validateTLS(bad)
	for _, msg := range c.Logging.validate() {
		bad("%s", msg)
	}
	if c.Shutdown.Timeout < 0 {
		bad("shutdown.timeout %v: must not be negative", c.Shutdown.Timeout)
	}
	if c.Shutdown.Wait < 0 {
		bad("shutdown.wait %v: must not be negative", c.Shutdown.Wait)
	}
	if c.Shutdown.Timeout == 0 {
		c.Shutdown.Timeout = DefaultShutdownTimeout
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// splitRegisterAddress parses a host:port with a port from 1 to 65535.
func splitRegisterAddress(a string) (string, int, error) {
	host, ps, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, errors.New("want host:port with a port from 1 to 65535")
	}
	return host, port, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
