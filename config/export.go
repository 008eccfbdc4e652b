package config

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/proxy"
)

// Export serves impl as the service id of Config.Services and registers it
// in the service's registries. impl's exported methods of the form
// func(ctx, args...) (T, error) or func(ctx, args...) error are served. It
// returns the registered provider URL, which carries the real port (or the
// protocol's RegisterAddress, when one is set).
//
// The steps: describe the provider (providerURL), wrap impl in a provider
// invoker (newProvider), put the filters in front of it
// (providerFilters), serve it on the protocol's port (serve), register
// the URL consumers are to dial (publishedURL, registerProvider) and keep
// the export for Shutdown (keepExport). Waiting for the registries holds
// up no other Export or Refer; an Export still registering when Shutdown
// begins fails. A nil ctx is an error (pass context.Background()).
func (a *Application) Export(ctx context.Context, id string, impl any) (*protocol.URL, error) {
	if ctx == nil {
		return nil, fmt.Errorf("config: export %s: %w", id, errNilContext)
	}
	e, sc, err := a.serve(id, impl)
	if err != nil {
		return nil, err
	}
	if err := a.registerProvider(ctx, id, sc, e); err != nil {
		_ = e.exporter.Unexport()
		return nil, err
	}
	if err := a.keepExport(ctx, e); err != nil {
		return nil, err
	}
	a.log.Info("exported", zap.String("service", id), zap.Stringer("url", e.url))
	return e.url, nil
}

// serve serves the service id on its protocol's port and opens its
// registries, all under a.mu: the first export of a protocol binds the
// port the next ones share.
func (a *Application) serve(id string, impl any) (*export, ServiceConfig, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ServiceConfig{}, errExportShutDown
	}
	sc, ok := a.cfg.Services[id]
	if !ok {
		return nil, sc, fmt.Errorf("config: export: unknown service %q (known: %s)", id, strings.Join(sortedKeys(a.cfg.Services), ", "))
	}
	u, err := a.providerURL(sc)
	if err != nil {
		return nil, sc, fmt.Errorf("config: export %s: %w", id, err)
	}
	prov, u, err := a.newProvider(u, impl)
	if err != nil {
		return nil, sc, fmt.Errorf("config: export %s: %w", id, err)
	}
	counting := a.monitor.ProviderRecorder()
	if u.Port != 0 {
		counting.SetAddr(u.Address())
	}
	exp, err := a.protos.ExportTLS(&urlInvoker{Invoker: protocol.Chain(prov, a.providerFilters(sc, counting)...), url: u}, a.tls.server[sc.Protocol])
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, sc, &KeyError{
				Key:    "protocols." + sc.Protocol + ".port",
				Advice: "set protocols." + sc.Protocol + ".port to a free port, or 0 for any free port",
				Err:    fmt.Errorf("config: export %s: %w: port %d of protocols.%s is taken by another process", id, err, u.Port, sc.Protocol),
			}
		}
		return nil, sc, fmt.Errorf("config: export %s: %w", id, err)
	}
	bound := exp.URL()
	counting.SetAddr(bound.Address())
	a.ports[sc.Protocol] = bound.Port
	regs, err := a.registriesFor(sc.Registries)
	if err != nil {
		_ = exp.Unexport()
		return nil, sc, err
	}
	return &export{url: a.publishedURL(sc, bound), exporter: exp, regs: regs}, sc, nil
}

// keepExport keeps e for Shutdown to unregister and close, or undoes it
// when Shutdown began while it was being registered.
func (a *Application) keepExport(ctx context.Context, e *export) error {
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.exports = append(a.exports, e)
	}
	a.mu.Unlock()
	if closed {
		for _, r := range e.regs {
			_ = r.Unregister(ctx, e.url)
		}
		_ = e.exporter.Unexport()
		return errExportShutDown
	}
	return nil
}

var errExportShutDown = errors.New("config: export: application is shut down")

// providerURL describes the service sc as its provider URL, on the port
// its protocol is bound to (or configured with, before the first export
// binds it), with a fresh random token when sc.Token is "true" (a.mu
// held).
func (a *Application) providerURL(sc ServiceConfig) (*protocol.URL, error) {
	pc := a.cfg.Protocols[sc.Protocol]
	port := pc.Port
	if p, ok := a.ports[sc.Protocol]; ok {
		port = p
	}
	params := map[string]string{
		protocol.KeyInterface:     sc.Interface,
		protocol.KeyApplication:   a.cfg.Application.Name,
		protocol.KeySide:          "provider",
		protocol.KeyTimestamp:     strconv.FormatInt(time.Now().UnixMilli(), 10),
		protocol.KeyTimeout:       strconv.FormatInt(sc.Timeout.Milliseconds(), 10),
		protocol.KeySerialization: pc.Serialization,
	}
	setIf(params, protocol.KeyVersion, sc.Version)
	setIf(params, protocol.KeyGroup, sc.Group)
	setIf(params, protocol.KeyTag, sc.Tag)
	if sc.Weight != nil {
		params[protocol.KeyWeight] = strconv.Itoa(*sc.Weight)
	}
	if sc.Warmup != nil {
		params[protocol.KeyWarmup] = strconv.FormatInt(sc.Warmup.Milliseconds(), 10)
	}
	if sc.Executes > 0 {
		params[protocol.KeyExecutes] = strconv.Itoa(sc.Executes)
	}
	token := sc.Token
	if token == "true" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		token = hex.EncodeToString(b[:])
	}
	setIf(params, protocol.KeyToken, token)
	return protocol.NewURL(pc.Name, pc.Host, port, sc.Interface, params), nil
}

// newProvider wraps impl in a provider invoker for u and returns it with
// u completed by the methods it serves and their signatures.
func (a *Application) newProvider(u *protocol.URL, impl any) (protocol.Invoker, *protocol.URL, error) {
	prov, err := proxy.NewProvider(u, impl)
	if err != nil {
		return nil, nil, err
	}
	u = u.With(protocol.KeyMethods, strings.Join(prov.Methods(), ",")).With(proxy.KeySignatures, prov.Signatures())
	return prov, u, nil
}

// providerFilters is the chain every call of the service sc passes, in
// order: counting, the executes bound, WithFilters' provider filters,
// then the service's named filters. The token is not a filter here: the
// dubbo protocol checks it from the URL before any argument is decoded.
func (a *Application) providerFilters(sc ServiceConfig, counting *monitor.ProviderRecorder) []protocol.Filter {
	filters := []protocol.Filter{filter.NewCount(counting)}
	if sc.Executes > 0 {
		filters = append(filters, filter.NewExecutes(sc.Executes))
	}
	filters = append(filters, a.filters.provider...)
	return append(filters, a.byName(sc.Filters)...)
}

// publishedURL is the URL registries get for the service exported at
// bound: bound itself, or with the protocol's RegisterAddress in place of
// the listen address.
func (a *Application) publishedURL(sc ServiceConfig, bound *protocol.URL) *protocol.URL {
	ra := a.cfg.Protocols[sc.Protocol].RegisterAddress
	if ra == "" {
		return bound
	}
	host, port, _ := splitRegisterAddress(ra) // checked by validate
	return protocol.NewURL(bound.Protocol, host, port, bound.Path, bound.Params())
}

// registerProvider registers e's URL in the registries of the service
// id, first waiting for each to answer unless its check is off.
func (a *Application) registerProvider(ctx context.Context, id string, sc ServiceConfig, e *export) error {
	ids := a.registryIDs(sc.Registries)
	for i, r := range e.regs {
		if check := a.cfg.Registries[ids[i]].Check; check == nil || *check {
			if err := a.awaitRegistry(ctx, ids[i], r, "service "+id); err != nil {
				return fmt.Errorf("config: export %s: %w", id, err)
			}
		}
		if err := r.Register(ctx, e.url); err != nil {
			return fmt.Errorf("config: export %s: register: %w", id, err)
		}
	}
	return nil
}

// urlInvoker gives a filter chain the export URL while keeping the
// provider's argument types visible to the protocol.
type urlInvoker struct {
	protocol.Invoker
	url *protocol.URL
}

func (u *urlInvoker) URL() *protocol.URL { return u.url }

// Unwrap lets the protocol find the provider's argument types behind the
// filters.
func (u *urlInvoker) Unwrap() protocol.Invoker { return u.Invoker }
