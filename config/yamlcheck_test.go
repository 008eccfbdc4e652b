package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestYAMLErrorsNamePathAndSuggest(t *testing.T) {
	_, err := Parse(strings.NewReader(`registries:
  zk:
    address: zookeeper://127.0.0.1:2181
    zookeeper: {sesion_timeout: 10s}
    timeout: 2
references:
  greeter:
    interface: demo.Greeter
    methods:
      SayHello: {timeout: 250, retries: 0}
    loadbalnce: random
services:
  g: {interface: demo.G, warmup: "10 minutes"}
shutdown: {timeout: 0}
logging: {levle: info}
`))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 6, err.Error())
	for i, want := range []string{
		`config: registries.zk.zookeeper.sesion_timeout (line 4): unknown key; did you mean "session_timeout"? (known in registries.zk.zookeeper: max_buffer_size, max_children, password, private_read, root, session_timeout, username)`,
		`config: registries.zk.timeout (line 5): 2 is not a duration: durations need a unit, such as 2s or 2ms`,
		`config: references.greeter.methods.SayHello.timeout (line 10): 250 is not a duration: durations need a unit, such as 250s or 250ms`,
		`config: references.greeter.loadbalnce (line 11): unknown key; did you mean "loadbalance"? (known in references.greeter: `,
		`config: services.g.warmup (line 13): "10 minutes" is not a duration (such as 2s, 500ms, 1m30s)`,
		`config: logging.levle (line 15): unknown key; did you mean "level"? (known in logging: format, level)`,
	} {
		assert.True(t, strings.HasPrefix(lines[i], want), "line %d:\n got %s\nwant %s", i, lines[i], want)
	}

	_, err = Parse(strings.NewReader("applicaton: {name: x}\n"))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), `config: applicaton (line 1): unknown key; did you mean "application"? (known in top level: application, `), err.Error())
}

// The ZooKeeper settings that moved out of the registry into its
// zookeeper section are errors at their old place that name the new one.
func TestYAMLMovedZooKeeperKeys(t *testing.T) {
	_, err := Parse(strings.NewReader(`registries:
  zk:
    address: zookeeper://127.0.0.1:2181
    session_timeout: 10s
    username: shop
    password: s3cret
`))
	require.Error(t, err)
	assert.Equal(t, []string{
		`config: registries.zk.session_timeout (line 4): this key moved to registries.zk.zookeeper.session_timeout (write zookeeper: {session_timeout: 10s})`,
		`config: registries.zk.username (line 5): this key moved to registries.zk.zookeeper.username (write zookeeper: {username: u, password: p})`,
		`config: registries.zk.password (line 6): this key moved to registries.zk.zookeeper.password (write zookeeper: {username: u, password: p})`,
	}, strings.Split(err.Error(), "\n"))
}
