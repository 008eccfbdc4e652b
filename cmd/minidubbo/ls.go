package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

const lsUsage = `usage: minidubbo ls [flags]

Lists the services registered in ZooKeeper (Dubbo's layout,
/dubbo/{interface}/{providers,consumers,routers}/{URL}): for each service its
providers and the number of its consumers. It only reads. Examples:

  minidubbo ls
  minidubbo ls -registry zookeeper://10.0.0.1:2181,10.0.0.2:2181 -service demo.hello.Greeter
  minidubbo ls -json

Node names that are not URLs are counted as "malformed".

flags:
`

// defaultRegistry is the registry address the ls and invoke commands use
// when -registry is not given.
const defaultRegistry = "zookeeper://127.0.0.1:2181"

// parseRegistryFlag reads the -registry flag of a command that needs a
// ZooKeeper registry: an empty value or one ParseAddress refuses is an
// error that names the flag and says what to write. also names another
// way to give the command its providers (invoke's -url), or is empty.
func parseRegistryFlag(addr, also string) (zookeeper.Address, error) {
	if strings.TrimSpace(addr) == "" {
		return zookeeper.Address{}, fmt.Errorf("-registry is empty: give a ZooKeeper address, such as -registry %s "+
			"(leave -registry out for that one)%s", defaultRegistry, also)
	}
	a, err := zookeeper.ParseAddress(addr)
	if err != nil {
		return a, fmt.Errorf("-registry: %w", err)
	}
	return a, nil
}

type lsListing struct {
	Services []lsService `json:"services"`
}

type lsService struct {
	Interface string       `json:"interface"`
	Providers []lsProvider `json:"providers"`
	Consumers int          `json:"consumers"`
	Routers   int          `json:"routers,omitempty"`
	// Malformed counts provider and consumer node names that are not URLs.
	Malformed int `json:"malformed,omitempty"`
}

type lsProvider struct {
	Address string   `json:"address"`
	Version string   `json:"version"`
	Group   string   `json:"group"`
	Weight  int      `json:"weight"`
	Methods []string `json:"methods"`
	// Signatures are the methods' shapes, when the provider publishes
	// them: "SayHello(string) (string, error)".
	Signatures  []string `json:"signatures,omitempty"`
	Application string   `json:"application"`
	URL         string   `json:"url"`
}

func runLS(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, lsUsage)
		fs.PrintDefaults()
	}
	regAddr := fs.String("registry", defaultRegistry, "ZooKeeper registry address, zookeeper://host:port[,host:port...][?root=dubbo]")
	only := fs.String("service", "", "list only this interface")
	asJSON := fs.Bool("json", false, "print one JSON object")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on connecting and listing")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "minidubbo ls: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *timeout <= 0 {
		return usageErr(errors.New("-timeout must be positive"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	addr, err := parseRegistryFlag(*regAddr, "")
	if err != nil {
		return usageErr(err)
	}
	lister, err := zookeeper.NewLister(ctx, *regAddr)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "minidubbo ls: no ZooKeeper session with %s within %v\n%s\n", strings.Join(addr.Servers, ","), *timeout, zooKeeperHint(strings.Join(addr.Servers, ",")))
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "minidubbo ls: %v\n", err)
		return 1
	}
	defer lister.Close()
	root := lister.Root()
	listing, err := listServices(ctx, lister, root, *only)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "minidubbo ls: listing %s on %s took longer than %v\n", root, strings.Join(addr.Servers, ","), *timeout)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "minidubbo ls: %v\n", err)
		return 1
	}
	if *asJSON {
		b, err := marshalResult(listing, false)
		if err != nil {
			fmt.Fprintf(stderr, "minidubbo ls: %v\n", err)
			return 1
		}
		_, _ = stdout.Write(b)
		return 0
	}
	printListing(stdout, listing, root)
	return 0
}

// listServices lists the services of the registry through its read-only
// listing API (only the one named only, when set).
func listServices(ctx context.Context, r registry.Lister, root, only string) (*lsListing, error) {
	var names []string
	if only != "" {
		names = []string{only}
	} else {
		var err error
		if names, err = r.Services(ctx); err != nil {
			return nil, err
		}
	}
	l := &lsListing{Services: []lsService{}}
	for _, name := range names {
		svc, found, err := listService(ctx, r, name)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		svc.Interface = name
		l.Services = append(l.Services, svc)
	}
	slices.SortFunc(l.Services, func(a, b lsService) int { return strings.Compare(a.Interface, b.Interface) })
	if only != "" && len(l.Services) == 0 {
		known, err := r.Services(ctx)
		if err != nil {
			return nil, err
		}
		if len(known) == 0 {
			return nil, fmt.Errorf("service %q is not registered (no service is, under %s)", only, root)
		}
		return nil, fmt.Errorf("service %q is not registered%s (known: %s)", only, named.DidYouMean(only, known), strings.Join(known, ", "))
	}
	return l, nil
}

// listService reads the categories of one service. found is false when it
// has none of them (it is not a service, or it is gone).
func listService(ctx context.Context, r registry.Lister, name string) (svc lsService, found bool, err error) {
	svc.Providers = []lsProvider{}
	nodes := func(category string) ([]string, error) {
		n, ok, err := r.Nodes(ctx, name, category)
		found = found || ok
		return n, err
	}
	provs, err := nodes(registry.CategoryProviders)
	if err != nil {
		return svc, false, err
	}
	for _, p := range provs {
		u, err := protocol.ParseURL(p)
		if err != nil {
			svc.Malformed++
			continue
		}
		var shapes []string
		if sigs, err := proxy.ParseSignatures(u.Param(proxy.KeySignatures, "")); err == nil {
			for _, n := range slices.Sorted(maps.Keys(sigs)) {
				shapes = append(shapes, sigs[n].Shape())
			}
		}
		svc.Providers = append(svc.Providers, lsProvider{
			Signatures:  shapes,
			Address:     u.Address(),
			Version:     u.Version(),
			Group:       u.Group(),
			Weight:      u.Weight(),
			Methods:     nonNil(u.Methods()),
			Application: u.Param(protocol.KeyApplication, ""),
			URL:         u.String(),
		})
	}
	slices.SortFunc(svc.Providers, func(a, b lsProvider) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return strings.Compare(a.URL, b.URL)
	})
	cons, err := nodes(registry.CategoryConsumers)
	if err != nil {
		return svc, false, err
	}
	for _, c := range cons {
		if _, err := protocol.ParseURL(c); err != nil {
			svc.Malformed++
			continue
		}
		svc.Consumers++
	}
	routers, err := nodes(registry.CategoryRouters)
	if err != nil {
		return svc, false, err
	}
	svc.Routers = len(routers)
	return svc, found, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printListing(w io.Writer, l *lsListing, root string) {
	if len(l.Services) == 0 {
		fmt.Fprintf(w, "no services under %s\n", root)
		return
	}
	for i, s := range l.Services {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, s.Interface)
		if len(s.Providers) == 0 {
			// The service's node is persistent, as in Dubbo: only its
			// providers' nodes go when they stop.
			fmt.Fprintln(w, "  providers: 0 (none running; a service stays listed after its last provider stops)")
		} else {
			fmt.Fprintf(w, "  providers: %d\n", len(s.Providers))
		}
		for _, p := range s.Providers {
			fmt.Fprintf(w, "    %s", p.Address)
			if p.Version != "" {
				fmt.Fprintf(w, " version=%s", p.Version)
			}
			if p.Group != "" {
				fmt.Fprintf(w, " group=%s", p.Group)
			}
			fmt.Fprintf(w, " weight=%d", p.Weight)
			if len(p.Methods) > 0 {
				fmt.Fprintf(w, " methods=%s", strings.Join(p.Methods, ","))
			}
			if p.Application != "" {
				fmt.Fprintf(w, " application=%s", p.Application)
			}
			fmt.Fprintln(w)
			for _, sig := range p.Signatures {
				fmt.Fprintf(w, "      %s\n", sig)
			}
		}
		fmt.Fprintf(w, "  consumers: %d\n", s.Consumers)
		if s.Routers > 0 {
			fmt.Fprintf(w, "  routers: %d\n", s.Routers)
		}
		if s.Malformed > 0 {
			fmt.Fprintf(w, "  malformed: %d\n", s.Malformed)
		}
	}
}
