package config_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/internal/zktest"
)

// The credentials of a registry's zookeeper section reach the ZooKeeper
// registry: the provider node it creates belongs to that digest identity,
// and a client without the credentials cannot delete it.
func TestZooKeeperSectionReachesTheRegistry(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	c, err := config.Parse(strings.NewReader(fmt.Sprintf(`application: {name: e2e-secure}
registries:
  zk:
    address: %q
    cache_file: "-"
    zookeeper: {session_timeout: 4s, username: shop, password: s3cret}
services:
  named: {interface: %s}
`, zkc.Address(), e2eInterface)))
	require.NoError(t, err)
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	u, err := app.Export(ctx, "named", named{name: "secure"})
	require.NoError(t, err)

	kids := waitProviders(ctx, t, raw, u.Address())
	node := providersPath + "/" + kids[0]
	acl, _, err := raw.GetACL(node)
	require.NoError(t, err)
	owner := false
	for _, e := range acl {
		// The server may mask the digest (shop:x) to a reader without it.
		owner = owner || e.Scheme == "digest" && strings.HasPrefix(e.ID, "shop:") && e.Perms == zk.PermAll
	}
	assert.True(t, owner, "the node's ACL gives the digest identity shop full rights: %v", acl)
	err = raw.Delete(node, -1)
	assert.True(t, errors.Is(err, zk.ErrNoAuth), "delete without credentials: %v", err)
}

// The root of a registry's zookeeper section is where the registry's
// nodes go: the provider node is under /shop, not /dubbo, and a consumer
// with the same root calls it.
func TestZooKeeperSectionRoot(t *testing.T) {
	ctx := testCtx(t)
	zkc := zktest.Start(t)
	raw := zktest.Client(t, zkc.Addrs()...)
	c, err := config.Parse(strings.NewReader(fmt.Sprintf(`application: {name: e2e-root}
registries:
  zk:
    address: %q
    cache_file: "-"
    zookeeper: {session_timeout: 4s, root: shop}
services:
  named: {interface: %s}
references:
  named: {interface: %s, check: true}
`, zkc.Address(), e2eInterface, e2eInterface)))
	require.NoError(t, err)
	app, err := config.New(c, config.WithLogger(logger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	u, err := app.Export(ctx, "named", named{name: "rooted"})
	require.NoError(t, err)
	kids, _, err := raw.Children("/shop/" + e2eInterface + "/providers")
	require.NoError(t, err)
	require.Equal(t, []string{u.Address()}, providerAddrs(kids))
	ok, _, err := raw.Exists("/dubbo/" + e2eInterface + "/providers")
	require.NoError(t, err)
	assert.False(t, ok, "nothing under the default root")
	var cl namedClient
	require.NoError(t, app.Refer(ctx, "named", &cl))
	got, err := cl.Who(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "rooted:1", got)
}
