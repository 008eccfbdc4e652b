package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleYAML = `
application:
  name: shop
registries:
  zk:
    address: zookeeper://127.0.0.1:2181,127.0.0.1:2182
protocols:
  dubbo:
    port: 20880
services:
  greeter:
    interface: demo.Greeter
    version: "1.0"
    weight: 0
    timeout: 3s
references:
  greeter:
    interface: demo.Greeter
    loadbalance: roundrobin
    methods:
      SayHello:
        timeout: 250ms
        retries: 0
`

func TestParseFillsDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(sampleYAML))
	require.NoError(t, err)
	assert.Equal(t, "shop", c.Application.Name)
	assert.Equal(t, DefaultRegistryTimeout, c.Registries["zk"].Timeout)
	assert.Zero(t, c.Registries["zk"].ZooKeeper.SessionTimeout, "left to the registry: the address's session parameter, else its default")
	p := c.Protocols["dubbo"]
	assert.Equal(t, "dubbo", p.Name)
	assert.Equal(t, "127.0.0.1", p.Host)
	assert.Equal(t, 20880, p.Port)
	assert.Equal(t, "msgpack", p.Serialization)
	s := c.Services["greeter"]
	assert.Equal(t, "dubbo", s.Protocol)
	require.NotNil(t, s.Weight)
	assert.Equal(t, 0, *s.Weight, "an explicit weight of 0 is kept")
	assert.Equal(t, 3*time.Second, s.Timeout)
	r := c.References["greeter"]
	assert.Equal(t, "roundrobin", r.LoadBalance)
	assert.Equal(t, "failover", r.Cluster)
	assert.Equal(t, DefaultRetries, *r.Retries)
	assert.Equal(t, time.Second, r.Timeout)
	assert.Equal(t, 250*time.Millisecond, r.Methods["SayHello"].Timeout)
	assert.Equal(t, 0, *r.Methods["SayHello"].Retries)
	assert.Equal(t, DefaultShutdownTimeout, c.Shutdown.Timeout)
}

func TestParseRejectsUnknownKey(t *testing.T) {
	_, err := Parse(strings.NewReader("application:\n  nmae: x\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nmae")
}

func TestValidateNamesKeyAndAllowedValues(t *testing.T) {
	neg := -1
	c := Config{
		Registries: map[string]RegistryConfig{"r": {Address: "etcd://x"}},
		Protocols:  map[string]ProtocolConfig{"p": {Name: "grpc", Serialization: "xml", Port: 70000}},
		Services:   map[string]ServiceConfig{"s": {Protocol: "nope", Registries: []string{"zz"}, Weight: &neg}},
		References: map[string]ReferenceConfig{"r": {Retries: &neg}},
	}
	err := c.validate(known{loadBalances: []string{"random", "roundrobin"}, clusters: []string{"failfast", "failover"}, registries: []string{"memory", "zk", "zookeeper"}, protocols: []string{"dubbo"}, serializations: []string{"json", "msgpack"}})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`registries.r.address "etcd://x": unknown scheme "etcd" (known: memory, zk, zookeeper)`,
		`protocols.p.name "grpc": unknown protocol (known: dubbo)`,
		`protocols.p.serialization "xml": unknown (known: json, msgpack)`,
		`protocols.p.port 70000`,
		`services.s.protocol: unknown protocol "nope" (known: p)`,
		`services.s.registries: unknown registry "zz" (known: r)`,
		`services.s.weight -1`,
		`references.r.retries -1`,
	} {
		assert.Contains(t, msg, want)
	}
	c2 := Config{References: map[string]ReferenceConfig{"r": {URL: "127.0.0.1:1", LoadBalance: "rr"}}}
	err = c2.validate(known{loadBalances: []string{"random", "roundrobin"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `references.r.loadbalance: unknown "rr" (known: random, roundrobin)`)
	// A near miss gets the nearest known name.
	c3 := Config{
		Registries: map[string]RegistryConfig{"zk": {Address: "zookeper://127.0.0.1:2181"}},
		References: map[string]ReferenceConfig{"r": {URL: "127.0.0.1:1", LoadBalance: "roundrobn", Cluster: "failfst"}},
	}
	err = c3.validate(known{loadBalances: []string{"random", "roundrobin"}, clusters: []string{"failfast", "failover"},
		registries: []string{"memory", "zk", "zookeeper"}, protocols: []string{"dubbo"}, serializations: []string{"json", "msgpack"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `references.r.loadbalance: unknown "roundrobn"; did you mean "roundrobin"? (known: random, roundrobin)`)
	assert.Contains(t, err.Error(), `references.r.cluster: unknown "failfst"; did you mean "failfast"? (known: failfast, failover)`)
	assert.Contains(t, err.Error(), `registries.zk.address "zookeper://127.0.0.1:2181": unknown scheme "zookeper"; did you mean "zookeeper"?`)
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(path, []byte(sampleYAML), 0o600))
	c, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "demo.Greeter", c.References["greeter"].Interface)
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
	require.NoError(t, os.WriteFile(path, []byte("references:\n  x: {}\n"), 0o600))
	_, err = Load(path)
	require.ErrorContains(t, err, "references.x: no url and no registries")
	assert.Contains(t, err.Error(), path)
}

// ZooKeeper's own settings are read from the registry's zookeeper section,
// checked there, and refused for a registry of another scheme.
func TestZooKeeperSection(t *testing.T) {
	c, err := Parse(strings.NewReader(`registries:
  zk:
    address: zookeeper://127.0.0.1:2181
    zookeeper: {session_timeout: 4s, username: shop, password: s3cret, private_read: true, max_children: 20000, max_buffer_size: 33554432, root: shop}
  bare: {address: "127.0.0.1:2181", zookeeper: {session_timeout: 3s}}
  same: {address: "127.0.0.1:2181?root=/shop", zookeeper: {root: shop}}
  short: {address: "zk://127.0.0.1:2181"}
`))
	require.NoError(t, err)
	assert.Equal(t, ZooKeeperConfig{SessionTimeout: 4 * time.Second, Username: "shop", Password: "s3cret",
		PrivateRead: true, MaxChildren: 20000, MaxBufferSize: 32 << 20, Root: "shop"}, c.Registries["zk"].ZooKeeper)
	assert.Equal(t, map[string]string{"private_read": "true", "max_children": "20000", "max_buffer_size": "33554432", "root": "shop"},
		c.Registries["zk"].ZooKeeper.params())
	assert.Equal(t, 3*time.Second, c.Registries["bare"].ZooKeeper.SessionTimeout, "an address without a scheme is ZooKeeper's")

	neg := Config{Registries: map[string]RegistryConfig{
		"mem":  {Address: "memory://x", ZooKeeper: ZooKeeperConfig{SessionTimeout: time.Second}},
		"half": {Address: "zk://127.0.0.1:2181", ZooKeeper: ZooKeeperConfig{Username: "shop"}},
		"neg":  {Address: "zookeeper://127.0.0.1:2181", ZooKeeper: ZooKeeperConfig{SessionTimeout: -time.Second}},
		"kids": {Address: "zookeeper://127.0.0.1:2181", ZooKeeper: ZooKeeperConfig{MaxChildren: -1}},
		"buf":  {Address: "zookeeper://127.0.0.1:2181", ZooKeeper: ZooKeeperConfig{MaxBufferSize: 1000}},
		"deep": {Address: "zookeeper://127.0.0.1:2181", ZooKeeper: ZooKeeperConfig{Root: "a/b"}},
		"two":  {Address: "zookeeper://127.0.0.1:2181?root=dubbo", ZooKeeper: ZooKeeperConfig{Root: "shop"}},
		"grp":  {Address: "zookeeper://127.0.0.1:2181?group=blue", ZooKeeper: ZooKeeperConfig{Root: "shop"}},
	}}
	err = neg.Validate()
	require.Error(t, err)
	msgs := strings.Split(err.Error(), "\n")
	assert.Equal(t, []string{
		"config: registries.buf.zookeeper.max_buffer_size 1000: must be 0 (the default, 16777216) or at least 65536",
		`config: registries.deep.zookeeper.root "a/b": must be one path element, such as dubbo`,
		`config: registries.grp.zookeeper.root: zookeeper registry: root "shop" disagrees with the address's group=blue (give it once, or the same)`,
		"config: registries.half.zookeeper: username and password go together",
		"config: registries.kids.zookeeper.max_children -1: must not be negative",
		"config: registries.mem.zookeeper: ZooKeeper settings for a memory:// address (they apply to zookeeper:// and zk:// addresses only)",
		"config: registries.neg.zookeeper.session_timeout -1s: must not be negative",
		`config: registries.two.zookeeper.root: zookeeper registry: root "shop" disagrees with the address's root=dubbo (give it once, or the same)`,
	}, msgs)
}
