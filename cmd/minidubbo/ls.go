package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
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

// lsSessionTimeout is the ZooKeeper session timeout ls asks for; the
// session only lives as long as the listing.
const lsSessionTimeout = 10 * time.Second

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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
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
	addr, err := zookeeper.ParseAddress(*regAddr)
	if err != nil {
		return usageErr(err)
	}
	root := strings.Trim(addr.Params.Get("root"), "/")
	if root == "" {
		root = strings.Trim(addr.Params.Get("group"), "/")
	}
	if root == "" {
		root = zookeeper.DefaultRoot
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	listing, err := listZK(ctx, addr, "/"+root, *only, *timeout)
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
	printListing(stdout, listing, "/"+root)
	return 0
}

// listZK connects to the servers of addr, waits for a session and lists
// the services under root (only the one named only, when set). ctx bounds
// everything; the connection is closed before it returns.
func listZK(ctx context.Context, addr zookeeper.Address, root, only string, timeout time.Duration) (*lsListing, error) {
	conn, events, err := zk.Connect(addr.Servers, lsSessionTimeout, zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(addr.Servers, ","), err)
	}
	defer conn.Close()
	// Connect returns before a session exists: wait for one.
	for session := false; !session; {
		select {
		case ev := <-events:
			switch ev.State {
			case zk.StateHasSession:
				session = true
			case zk.StateAuthFailed:
				return nil, fmt.Errorf("zookeeper %s: authentication failed", strings.Join(addr.Servers, ","))
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("no ZooKeeper session with %s within %v", strings.Join(addr.Servers, ","), timeout)
		}
	}
	if addr.Username != "" {
		if err := conn.AddAuth("digest", []byte(addr.Username+":"+addr.Password)); err != nil {
			return nil, fmt.Errorf("zookeeper: add credentials: %w", err)
		}
	}
	// ZooKeeper calls take no context: run them aside and give up (closing
	// the connection, which ends them) when ctx is done.
	type result struct {
		l   *lsListing
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := listServices(conn, root, only)
		done <- result{l, err}
	}()
	select {
	case r := <-done:
		return r.l, r.err
	case <-ctx.Done():
		conn.Close()
		<-done
		return nil, fmt.Errorf("listing %s on %s took longer than %v", root, strings.Join(addr.Servers, ","), timeout)
	}
}

func listServices(conn *zk.Conn, root, only string) (*lsListing, error) {
	var names []string
	if only != "" {
		names = []string{url.QueryEscape(only)}
	} else {
		var err error
		names, _, err = conn.Children(root)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("list %s: %w", root, err)
		}
		slices.Sort(names)
	}
	l := &lsListing{Services: []lsService{}}
	for _, name := range names {
		svc, found, err := listService(conn, root+"/"+name)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if iface, err := url.QueryUnescape(name); err == nil {
			svc.Interface = iface
		} else {
			svc.Interface = name
		}
		l.Services = append(l.Services, svc)
	}
	slices.SortFunc(l.Services, func(a, b lsService) int { return strings.Compare(a.Interface, b.Interface) })
	if only != "" && len(l.Services) == 0 {
		known, _, err := conn.Children(root)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("list %s: %w", root, err)
		}
		for i, k := range known {
			if u, err := url.QueryUnescape(k); err == nil {
				known[i] = u
			}
		}
		slices.Sort(known)
		if len(known) == 0 {
			return nil, fmt.Errorf("service %q is not registered (no service is, under %s)", only, root)
		}
		return nil, fmt.Errorf("service %q is not registered%s (known: %s)", only, named.DidYouMean(only, known), strings.Join(known, ", "))
	}
	return l, nil
}

// listService reads the category nodes of one service node. found is false
// when the node has none of them (it is not a service, or it is gone).
func listService(conn *zk.Conn, path string) (svc lsService, found bool, err error) {
	svc.Providers = []lsProvider{}
	children := func(category string) ([]string, error) {
		c, _, err := conn.Children(path + "/" + category)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", path, category, err)
		}
		found = true
		return c, nil
	}
	provs, err := children("providers")
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
	cons, err := children("consumers")
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
	routers, err := children("routers")
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
		fmt.Fprintf(w, "  providers: %d\n", len(s.Providers))
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

// nopLogger silences the ZooKeeper client, which logs every reconnect.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
