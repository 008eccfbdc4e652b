package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/registry"
)

// Lister reads Dubbo's layout in ZooKeeper
// (/{root}/{escaped interface}/{category}/{escaped URL}) over a plain
// session of its own: it registers nothing, watches nothing and writes no
// cache. Safe for concurrent use.
type Lister struct {
	conn    *zk.Conn
	root    string
	servers string
}

var _ registry.Lister = (*Lister)(nil)

// listSessionTimeout is the session timeout a Lister asks for; the session
// only lives as long as the listing.
const listSessionTimeout = DefaultSessionTimeout

// NewLister connects to the servers of address (every form ParseAddress
// accepts; root= or group= chooses the top node, credentials are sent) and
// waits for a session, within ctx.
func NewLister(ctx context.Context, address string) (*Lister, error) {
	a, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	root := strings.Trim(a.Params.Get("root"), "/")
	if root == "" {
		root = strings.Trim(a.Params.Get("group"), "/")
	}
	if root == "" {
		root = DefaultRoot
	}
	servers := strings.Join(a.Servers, ",")
	conn, events, err := zk.Connect(a.Servers, listSessionTimeout, zk.WithLogger(zkLogger{l: zap.NewNop()}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", servers, err)
	}
	// Connect returns before a session exists: wait for one.
	for session := false; !session; {
		select {
		case ev := <-events:
			switch ev.State {
			case zk.StateHasSession:
				session = true
			case zk.StateAuthFailed:
				conn.Close()
				return nil, fmt.Errorf("zookeeper %s: authentication failed", servers)
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session with %s: %w", servers, ctx.Err())
		}
	}
	if a.Username != "" {
		if err := conn.AddAuth("digest", []byte(a.Username+":"+a.Password)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zookeeper: add credentials: %w", err)
		}
	}
	return &Lister{conn: conn, root: "/" + root, servers: servers}, nil
}

// Root returns the top node, such as "/dubbo".
func (l *Lister) Root() string { return l.root }

// Services implements registry.Lister: the unescaped names of the
// children of the root.
func (l *Lister) Services(ctx context.Context) ([]string, error) {
	names, err := l.children(ctx, l.root)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		if u, err := url.QueryUnescape(n); err == nil {
			names[i] = u
		}
	}
	slices.Sort(names)
	return names, nil
}

// Nodes implements registry.Lister.
func (l *Lister) Nodes(ctx context.Context, service, category string) ([]string, bool, error) {
	path := l.root + "/" + url.QueryEscape(service) + "/" + category
	var found bool
	nodes, err := l.run(ctx, func() ([]string, error) {
		c, _, err := l.conn.Children(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		found = err == nil
		return c, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", path, err)
	}
	return nodes, found, nil
}

// Close implements registry.Lister.
func (l *Lister) Close() error {
	l.conn.Close()
	return nil
}

func (l *Lister) children(ctx context.Context, path string) ([]string, error) {
	c, err := l.run(ctx, func() ([]string, error) {
		c, _, err := l.conn.Children(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	return c, nil
}

// run runs a ZooKeeper call (they take no context) aside, and gives up
// when ctx is done, closing the connection, which ends the call.
func (l *Lister) run(ctx context.Context, f func() ([]string, error)) ([]string, error) {
	type result struct {
		c   []string
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := f()
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		l.conn.Close()
		<-done
		return nil, fmt.Errorf("on %s: %w", l.servers, ctx.Err())
	}
}
