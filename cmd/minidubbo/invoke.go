package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

const invokeUsage = `usage: minidubbo invoke [flags]

Calls one method of a service through the whole framework (registry,
router, load balancer, protocol) and prints the result as JSON. Providers
are found in the registry, or called directly with -url. Examples:

  minidubbo invoke -service demo.hello.Greeter -method SayHello -args '["world"]'
  minidubbo invoke -url 127.0.0.1:20880 -service demo.Calc -method Add -args '[1, 2]'
  minidubbo invoke -service demo.Orders -version 1.0 -method Find -args '[{"id": 7}]' -attach dubbo.tag=gray
  minidubbo invoke -service demo.Greeter -method SayHello -args '["tls"]' -tls-ca ca.pem -tls-cert me.pem -tls-key me.key

Arguments are a JSON array; integers stay integers, and an object may stand
for a struct parameter. A business error prints "error (code N): message".
The exit status is 0 on success, 1 when the call fails, 2 for bad flags.

flags:
`

const invokeRef = "cli"

func runInvoke(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, invokeUsage)
		fs.PrintDefaults()
	}
	regAddr := fs.String("registry", defaultRegistry, "registry address (zookeeper://host:port[,host:port...])")
	direct := fs.String("url", "", "call these providers directly, host:port[,host:port...], without a registry")
	iface := fs.String("service", "", "interface of the service (required)")
	version := fs.String("version", "", "version of the service")
	group := fs.String("group", "", "group of the service")
	method := fs.String("method", "", "method to call (required)")
	rawArgs := fs.String("args", "[]", "arguments, a JSON array")
	timeout := fs.Duration("timeout", 3*time.Second, "bound on finding providers, and on the call")
	attach := fs.String("attach", "", "attachments sent with the call, key=value,...")
	compact := fs.Bool("json", false, "print the result as JSON on one line (default: indented)")
	useTLS := fs.Bool("tls", false, "speak TLS to the providers (implied by the other -tls flags)")
	tlsCA := fs.String("tls-ca", "", "PEM file of the CAs trusted to sign providers' certificates (default: the system's)")
	tlsCert := fs.String("tls-cert", "", "PEM file of this client's certificate, for providers that want one (mutual TLS)")
	tlsKey := fs.String("tls-key", "", "PEM file of the key of -tls-cert")
	tlsName := fs.String("tls-server-name", "", "name the providers' certificates must be valid for (default: their host)")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "minidubbo invoke: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	registrySet := false
	fs.Visit(func(f *flag.Flag) { registrySet = registrySet || f.Name == "registry" })
	switch {
	case *iface == "":
		return usageErr(errors.New("-service is required: the interface to call (minidubbo ls lists the registered ones)"))
	case *method == "":
		return usageErr(errors.New("-method is required: the method to call (minidubbo ls -service IFACE prints its methods)"))
	case *timeout <= 0:
		return usageErr(errors.New("-timeout must be positive"))
	case registrySet && *direct != "":
		return usageErr(errors.New("give -registry or -url, not both"))
	case *direct == "":
		if _, err := parseRegistryFlag(*regAddr, ", or -url host:port to call a provider without a registry"); err != nil {
			return usageErr(err)
		}
	default:
		if err := checkURLFlag(*direct); err != nil {
			return usageErr(err)
		}
	}
	argsSet := false
	fs.Visit(func(f *flag.Flag) { argsSet = argsSet || f.Name == "args" })
	callArgs, err := parseArgs(*rawArgs)
	if err != nil {
		return usageErr(fmt.Errorf("-args: %w", err))
	}
	attachments, err := parsePairs(*attach, "attach", "any text", func(s string) (string, error) { return s, nil })
	if err != nil {
		return usageErr(err)
	}

	retries := 0 // a call may not be idempotent: try it once
	ref := config.ReferenceConfig{
		Interface: *iface,
		Version:   *version,
		Group:     *group,
		URL:       *direct,
		Timeout:   *timeout,
		Retries:   &retries,
		Check:     true,
	}
	if *useTLS || *tlsCA != "" || *tlsCert != "" || *tlsKey != "" || *tlsName != "" {
		if (*tlsCert == "") != (*tlsKey == "") {
			return usageErr(errors.New("-tls-cert and -tls-key go together"))
		}
		ref.TLS = &config.ClientTLSConfig{CAFile: *tlsCA, CertFile: *tlsCert, KeyFile: *tlsKey, ServerName: *tlsName}
	}
	cfg := &config.Config{
		Application: config.ApplicationConfig{Name: "minidubbo-cli"},
		References:  map[string]config.ReferenceConfig{invokeRef: ref},
		Shutdown:    config.ShutdownConfig{Timeout: *timeout},
	}
	if *direct == "" {
		cfg.Registries = map[string]config.RegistryConfig{"cli": { // the id names it in errors: "asked registry cli: ..."
			Address:   *regAddr,
			Timeout:   *timeout,
			CacheFile: "-", // a one-shot call should see the registry, not a cache
		}}
	}
	app, err := config.New(cfg)
	if err != nil {
		return usageErr(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		_ = app.Shutdown(ctx)
	}()

	calling := false // the providers were found; the call itself failed
	fail := func(err error) int {
		switch {
		case ref.TLS != nil && errors.Is(err, status.ErrDial) && errors.As(err, new(*tls.CertificateVerificationError)):
			err = fmt.Errorf("%w\n(the provider's certificate is not trusted: give -tls-ca with the CA file that signed it, "+
				"and -tls-server-name when it is valid for another name than the address's host)", err)
		case ref.TLS != nil && errors.Is(err, status.ErrDial) && strings.Contains(err.Error(), "tls handshake with "):
			// A provider runs there, but the handshake failed: the
			// question below would mislead.
			err = fmt.Errorf("%w\n(the TLS handshake failed: does the provider there speak TLS? "+
				"Leave out the -tls flags to call one that does not)", err)
		case *direct != "" && errors.Is(err, status.ErrDial) && !errors.Is(err, dubbo.ErrTLSRequired):
			err = fmt.Errorf("%w\n(is a provider running there? -url takes the host:port it serves on)", err)
		case *direct != "" && errors.Is(err, status.ErrServiceNotFound) && strings.Contains(err.Error(), "with any other version or group"):
			// The provider serves no version of that interface: the
			// name is what to check.
			err = fmt.Errorf("%w\n(this call asked for -service %s: give the interface name the provider exported)", err, *iface)
		case errors.Is(err, status.ErrServiceNotFound) && strings.Contains(err.Error(), "with any other version or group"):
			// The registry named a provider that does not serve the
			// interface at all: its node outlived what it described.
			err = fmt.Errorf("%w\n(the registry lists that address as a provider of %s, but what serves there now does not "+
				"serve it: a provider that stopped without unregistering? Its node goes when its ZooKeeper session ends; "+
				"minidubbo ls -service %s lists the addresses)", err, *iface, *iface)
		case errors.Is(err, status.ErrServiceNotFound) && strings.Contains(err.Error(), "no service "):
			err = fmt.Errorf("%w\n(this call asked for %s; give -version and -group as the provider exported it%s)",
				err, askedFor(*iface, *version, *group), lsHint(*direct, *iface))
		case errors.Is(err, status.ErrBadRequest) && !argsSet && strings.Contains(err.Error(), "got 0"):
			err = fmt.Errorf("%w\n(no -args were given: the arguments go in a JSON array, such as -args '[\"world\"]')", err)
		case calling && (errors.Is(err, status.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)):
			err = fmt.Errorf("%w\n(the call had -timeout %v: give a longer one if the method is slow)", err, *timeout)
		case errors.Is(err, dubbo.ErrTLSRequired):
			err = fmt.Errorf("%w\n(give -tls, or -tls-ca with the CA file that signed the provider's certificate)", err)
		case errors.Is(err, dubbo.ErrClientCertRequired):
			err = fmt.Errorf("%w\n(give -tls-cert and -tls-key)", err)
		case strings.Contains(err.Error(), exchange.PlainOnTLSMessage):
			err = fmt.Errorf("%w\n(give -tls, or -tls-ca with the CA file that signed the provider's certificate)", err)
		}
		var se *service.Error
		if errors.As(err, &se) {
			fmt.Fprintf(stderr, "error (code %d): %s\n", se.Code, se.Message)
		} else {
			fmt.Fprintf(stderr, "minidubbo invoke: %v\n", err)
		}
		return 1
	}
	rctx, cancel := context.WithTimeout(context.Background(), *timeout)
	g, err := app.ReferGeneric(rctx, invokeRef)
	cancel()
	if err != nil {
		switch {
		case *direct == "" && errors.Is(err, config.ErrRegistryUnreachable):
			err = fmt.Errorf("no provider list for %s from %s within %v: %w\n%s", *iface, *regAddr, *timeout, config.WithoutAdvice(err), zooKeeperHint(*regAddr))
		case *direct == "" && errors.Is(err, context.DeadlineExceeded):
			err = fmt.Errorf("no provider list for %s from %s within %v (is the registry up?): %w", *iface, *regAddr, *timeout, err)
		}
		if *direct == "" && errors.Is(err, cluster.ErrNoProvider) {
			if hint := nearestService(*regAddr, *iface, *timeout); hint != "" {
				// The CLI's own hint names the registered services;
				// config's "is a provider running?" would be a second one.
				err = fmt.Errorf("%w%s", config.WithoutAdvice(err), hint)
			} else if strings.Contains(err.Error(), "; registered: version ") {
				// Providers of the interface are registered, with another
				// version or group than the call asked for.
				err = fmt.Errorf("%w\n(this call asked for %s: give -version and -group as one of those registered%s)",
					err, askedFor(*iface, *version, *group), lsHint(*direct, *iface))
			}
		}
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	for _, a := range attachments {
		ctx = service.WithAttachment(ctx, a.name, a.v)
	}
	calling = true
	res, err := g.Invoke(ctx, *method, callArgs)
	if err != nil {
		if (errors.Is(err, status.ErrBadRequest) || errors.Is(err, status.ErrServiceNotFound)) && !strings.Contains(err.Error(), exchange.PlainOnTLSMessage) {
			// A provider that lists the service's methods itself ("(it
			// has: ...)") needs no second list.
			if hint := expectedShape(app.Providers(invokeRef), *method); hint != "" &&
				(strings.HasPrefix(hint, "expected: ") || !strings.Contains(err.Error(), "(it has: ")) {
				err = fmt.Errorf("%w\n%s", err, hint)
			}
		}
		return fail(err)
	}
	out, err := marshalResult(res, !*compact)
	if err != nil {
		return fail(fmt.Errorf("the result (%T) does not print as JSON: %w", res, err))
	}
	_, _ = stdout.Write(out)
	return 0
}

// parseArgs decodes a JSON array of arguments; numbers become int64 when
// they are integers and float64 otherwise, so that integers reach the
// provider as integers.
func parseArgs(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty; give a JSON array such as [] or [1, \"a\"]")
		}
		return nil, fmt.Errorf(`not valid JSON: %w; give a JSON array, quoted for the shell: -args '["world"]'`, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("extra data after the JSON array")
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON array, not %s", jsonKind(v))
	}
	for i := range arr {
		arr[i] = numbers(arr[i])
	}
	return arr, nil
}

// numbers replaces every json.Number in v by an int64 or a float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64() // the decoder checked the syntax
		return f
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// marshalResult encodes a decoded reply as JSON, followed by a newline.
func marshalResult(v any, indent bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(stringKeys(v)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// stringKeys turns maps with non-string keys (which some decoders produce)
// into maps with string keys, which JSON can hold.
func stringKeys(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
	}
	return v
}

// expectedShape says what method takes, from the signatures the providers
// publish ("expected: Add(int64, int64) (int64, error)"), or which methods
// there are when it has none; "" when no provider publishes signatures.
func expectedShape(providers []*protocol.URL, method string) string {
	for _, u := range providers {
		sigs, err := proxy.ParseSignatures(u.Param(proxy.KeySignatures, ""))
		if err != nil || len(sigs) == 0 {
			continue
		}
		if s, ok := sigs[method]; ok {
			return "expected: " + s.Shape()
		}
		names := slices.Sorted(maps.Keys(sigs))
		return fmt.Sprintf("%s has no method %q%s (its methods: %s)", u.Interface(), method, named.DidYouMean(method, names), strings.Join(names, ", "))
	}
	return ""
}

// nearestService returns, when iface itself is not registered, a line
// saying so with the registered services (the first 20) and the one
// nearest to iface; "" when it is registered or the registry cannot be
// listed within timeout.
func nearestService(regAddr, iface string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := zookeeper.NewLister(ctx, regAddr)
	if err != nil {
		return ""
	}
	defer l.Close()
	known, err := l.Services(ctx)
	if err != nil || slices.Contains(known, iface) {
		return ""
	}
	if len(known) == 0 {
		return fmt.Sprintf("\n(service %q is not registered: no service is)", iface)
	}
	const most = 20
	list := strings.Join(known, ", ")
	if len(known) > most {
		list = strings.Join(known[:most], ", ") + fmt.Sprintf(", and %d more: minidubbo ls lists them", len(known)-most)
	}
	return fmt.Sprintf("\n(service %q is not registered%s (known: %s))", iface, named.DidYouMean(iface, known), list)
}

// checkURLFlag checks invoke's -url: providers as host:port (or
// dubbo://host:port), separated by commas. It says what is wrong with the
// first bad one and what to write.
func checkURLFlag(s string) error {
	const write = "write host:port[,host:port...], such as -url 127.0.0.1:20880"
	for h := range strings.SplitSeq(s, ",") {
		h = strings.TrimSpace(h)
		rest := h
		if scheme, after, ok := strings.Cut(h, "://"); ok {
			if scheme != "dubbo" {
				return fmt.Errorf("-url %q: unknown scheme %q (known: dubbo); %s", h, scheme, write)
			}
			rest = after
		}
		rest, _, _ = strings.Cut(rest, "?")
		rest, _, _ = strings.Cut(rest, "/")
		if rest == "" {
			return fmt.Errorf("-url %q names no provider; %s", s, write)
		}
		if _, err := strconv.Atoi(rest); err == nil {
			return fmt.Errorf("-url %q is a port alone; write host:port, such as -url 127.0.0.1:%s", h, rest)
		}
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return fmt.Errorf("-url %q is not host:port (%v); %s", h, err, write)
		}
		n, err := strconv.Atoi(port)
		switch {
		case host == "":
			return fmt.Errorf("-url %q: no host before the port; write host:port, such as -url 127.0.0.1:%s", h, port)
		case err != nil:
			return fmt.Errorf("-url %q: port %q is not a number; %s", h, port, write)
		case n < 1 || n > 65535:
			return fmt.Errorf("-url %q: port %d is out of range (1-65535)", h, n)
		}
	}
	return nil
}

// askedFor names the service a call asked for, version and group
// included, as a provider tells services apart.
func askedFor(iface, version, group string) string {
	v, g := "no version", "no group"
	if version != "" {
		v = "version " + strconv.Quote(version)
	}
	if group != "" {
		g = "group " + strconv.Quote(group)
	}
	return fmt.Sprintf("%s with %s and %s", iface, v, g)
}

// lsHint says where to read a service's version and group: the registry
// (minidubbo ls), unless the call went without one (the provider's own
// answer names those it serves).
func lsHint(direct, iface string) string {
	if direct != "" {
		return ""
	}
	return "; minidubbo ls -service " + iface + " prints them"
}
