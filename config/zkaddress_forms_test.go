package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// config takes every address form registry/zookeeper reads (its own
// TestParseAddress table), and refuses, at Parse, the ones it refuses,
// with its reason.
func TestZooKeeperAddressFormsAsTheRegistryReadsThem(t *testing.T) {
	for _, a := range []string{
		"zookeeper://127.0.0.1:2181",
		"zookeeper://h1:2181,h2:2182,h3:2183",
		"h1,h2:3000",
		"127.0.0.1:2181",
		"zk://u:p@h1:1?backup=h2:2,h3:3&session=4000",
		"zookeeper://h1:2181/?root=x",
	} {
		_, err := Parse(strings.NewReader(fmt.Sprintf("registries: {zk: {address: %q}}\n", a)))
		require.NoError(t, err, a)
	}
	for a, why := range map[string]string{
		"zookeeper://":         "names no server; write HOST:PORT, such as zookeeper://127.0.0.1:2181",
		"zookeeper://h1:99999": "port 99999 is out of range (1-65535",
		"zookeeper://u@h1:1":   "user:password",
	} {
		_, err := Parse(strings.NewReader(fmt.Sprintf("registries: {zk: {address: %q}}\n", a)))
		require.ErrorContains(t, err, why, a)
		require.ErrorContains(t, err, "registries.zk.address", a)
	}
}
