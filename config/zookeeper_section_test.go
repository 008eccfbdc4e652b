package config_test

import (
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
	t.Cleanup(func() { _ = app.Shutdown(ctx) })
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
