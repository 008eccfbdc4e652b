package protocol

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/serialize"
)

// Well-known URL parameter keys, as Dubbo names them.
const (
	KeyInterface     = "interface"
	KeyVersion       = "version"
	KeyGroup         = "group"
	KeyMethods       = "methods"
	KeyWeight        = "weight"
	KeyTimeout       = "timeout"
	KeyTimestamp     = "timestamp"
	KeyWarmup        = "warmup"
	KeySerialization = "serialization"
	KeyToken         = "token"
	KeyApplication   = "application"
	KeySide          = "side"
	KeyCategory      = "category"
	KeyTag           = "dubbo.tag"
	KeyLoadBalance   = "loadbalance"
	KeyCluster       = "cluster"
	KeyRetries       = "retries"
	KeyExecutes      = "executes"
	// KeyRemoteApplication is the attachment by which a consumer tells
	// the provider its application name. On a referred provider URL it
	// is the name the protocol sends with every call.
	KeyRemoteApplication = "remote.application"
)

// Defaults for the well-known keys.
const (
	DefaultWeight  = 100
	DefaultTimeout = time.Second
	DefaultWarmup  = 10 * time.Minute
	// MaxWeight is the largest weight a URL gives (Weight caps larger
	// values): the weighted balancers add the weights of a list, and
	// with weights up to 2^31-1 no sum of a list wraps around int64.
	MaxWeight = math.MaxInt32
)

// URL describes a provider, a consumer or a registry, in Dubbo's form
// protocol://host:port/path?key=value&... (for example
// dubbo://127.0.0.1:20880/demo.Greeter?version=1.0&weight=100).
//
// A URL is immutable once built: methods that change it return a copy, so a
// *URL may be shared between goroutines freely.
type URL struct {
	Protocol string
	Host     string
	Port     int
	// Path is the service interface for provider and consumer URLs.
	Path   string
	params map[string]string
}

// NewURL returns a URL. params may be nil; it is copied.
func NewURL(protocol, host string, port int, path string, params map[string]string) *URL {
	p := make(map[string]string, len(params))
	for k, v := range params {
		p[k] = v
	}
	return &URL{Protocol: protocol, Host: host, Port: port, Path: path, params: p}
}

// ParseURL parses s, which may be query-escaped as it is in registry node
// names. It returns an error naming what is wrong.
func ParseURL(s string) (*URL, error) {
	if strings.Contains(s, "%3A%2F%2F") || strings.Contains(s, "%3a%2f%2f") {
		un, err := url.QueryUnescape(s)
		if err != nil {
			return nil, fmt.Errorf("protocol: parse url %q: %w", s, err)
		}
		s = un
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("protocol: parse url %q: missing scheme", s)
	}
	u := &URL{Protocol: scheme, params: map[string]string{}}
	rest, query, _ := strings.Cut(rest, "?")
	hostport, path, _ := strings.Cut(rest, "/")
	u.Path = path
	if hostport != "" {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			// host without a port
			if strings.Contains(err.Error(), "missing port") {
				host, port = hostport, ""
			} else {
				return nil, fmt.Errorf("protocol: parse url %q: %w", s, err)
			}
		}
		u.Host = host
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n < 0 || n > 65535 {
				return nil, fmt.Errorf("protocol: parse url %q: bad port %q", s, port)
			}
			u.Port = n
		}
	}
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("protocol: parse url %q: %w", s, err)
		}
		for k, v := range vals {
			if len(v) > 0 {
				u.params[k] = v[len(v)-1]
			}
		}
	}
	return u, nil
}

// Address returns host:port.
func (u *URL) Address() string {
	if u.Port == 0 {
		return u.Host
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}

// String formats the URL with its parameters sorted by key, so equal URLs
// format equally.
func (u *URL) String() string {
	var b strings.Builder
	b.WriteString(u.Protocol)
	b.WriteString("://")
	b.WriteString(u.Address())
	b.WriteByte('/')
	b.WriteString(u.Path)
	keys := make([]string, 0, len(u.params))
	for k := range u.params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(u.params[k]))
	}
	return b.String()
}

// Escaped returns the query-escaped String, as used for registry node names.
func (u *URL) Escaped() string { return url.QueryEscape(u.String()) }

// Param returns the value of key, or def when it is absent or empty.
func (u *URL) Param(key, def string) string {
	if v, ok := u.params[key]; ok && v != "" {
		return v
	}
	return def
}

// Params returns a copy of all parameters.
func (u *URL) Params() map[string]string {
	p := make(map[string]string, len(u.params))
	for k, v := range u.params {
		p[k] = v
	}
	return p
}

// With returns a copy of u with key set to value.
func (u *URL) With(key, value string) *URL {
	c := *u
	c.params = u.Params()
	c.params[key] = value
	return &c
}

// IntParam returns key as an integer, def when absent, and an error naming
// the key when the value is not an integer.
func (u *URL) IntParam(key string, def int64) (int64, error) {
	v, ok := u.params[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def, fmt.Errorf("protocol: url parameter %s=%q is not an integer", key, v)
	}
	return n, nil
}

func (u *URL) intOr(key string, def int64) int64 {
	n, err := u.IntParam(key, def)
	if err != nil {
		return def
	}
	return n
}

// Interface returns the service interface: the interface parameter, or the path.
func (u *URL) Interface() string { return u.Param(KeyInterface, u.Path) }

// Version returns the service version ("" when unset).
func (u *URL) Version() string { return u.params[KeyVersion] }

// Group returns the service group ("" when unset).
func (u *URL) Group() string { return u.params[KeyGroup] }

// ServiceKey returns group/interface:version, leaving out empty parts, as
// Dubbo does. Providers and consumers match on it.
func (u *URL) ServiceKey() string { return ServiceKey(u.Interface(), u.Version(), u.Group()) }

// ServiceKey returns group/interface:version, leaving out empty parts.
func ServiceKey(iface, version, group string) string {
	if version == "" && group == "" {
		return iface
	}
	var b strings.Builder
	if group != "" {
		b.WriteString(group)
		b.WriteByte('/')
	}
	b.WriteString(iface)
	if version != "" {
		b.WriteByte(':')
		b.WriteString(version)
	}
	return b.String()
}

// Methods returns the comma-separated methods parameter as a slice.
func (u *URL) Methods() []string {
	v := u.params[KeyMethods]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Weight returns the weight parameter (default DefaultWeight; negative
// values count as 0, values above MaxWeight as MaxWeight).
func (u *URL) Weight() int {
	return int(min(max(u.intOr(KeyWeight, DefaultWeight), 0), MaxWeight))
}

// Timeout returns the timeout parameter, in milliseconds on the URL
// (default DefaultTimeout).
func (u *URL) Timeout() time.Duration {
	ms := u.intOr(KeyTimeout, -1)
	if ms <= 0 {
		return DefaultTimeout
	}
	return millis(ms)
}

// millis converts milliseconds from a URL to a Duration, saturating at
// the largest Duration instead of overflowing into a negative one.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Timestamp returns the provider's start time from the timestamp parameter
// (milliseconds since the epoch), or the zero time.
func (u *URL) Timestamp() time.Time {
	ms := u.intOr(KeyTimestamp, 0)
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Warmup returns the warm-up period (milliseconds on the URL; default
// DefaultWarmup).
func (u *URL) Warmup() time.Duration {
	ms := u.intOr(KeyWarmup, -1)
	if ms < 0 {
		return DefaultWarmup
	}
	return millis(ms)
}

// Serialization returns the serialization name (default
// serialize.Msgpack).
func (u *URL) Serialization() string { return u.Param(KeySerialization, serialize.Msgpack) }

// IsFrameworkKey reports whether an attachment key belongs to the
// framework (the token, the calling application): such attachments are
// read by filters and removed before the service method sees the call's
// attachments.
func IsFrameworkKey(key string) bool {
	return key == KeyToken || key == KeyRemoteApplication
}
