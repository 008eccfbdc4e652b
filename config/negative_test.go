package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every count and duration in the YAML follows the layers' rule: left out
// (zero) means the default, negative is an error naming the key.
func TestNegativeValuesNameTheirKey(t *testing.T) {
	c, err := Parse(strings.NewReader(`
registries:
  zk:
    address: zookeeper://127.0.0.1:2181
    timeout: -1s
    zookeeper: {session_timeout: -2s}
protocols:
  dubbo: {port: -1}
services:
  s: {interface: demo.S, weight: -1, timeout: -1s, warmup: -1s, executes: -1}
references:
  r:
    retries: -1
    timeout: -1s
    forks: -1
    failback: {retries: -1, queue: -2, backoff: -1s, timeout: -2s}
    hash: {nodes: -1, arguments: [-1]}
    methods:
      M: {timeout: -1s, retries: -1}
monitor: {registries: [zk], interval: -1s, buffer_reports: -1, buffer_bytes: -1}
shutdown: {timeout: -1s, wait: -2s}
`))
	require.Nil(t, c)
	require.Error(t, err)
	assert.ElementsMatch(t, []string{
		"config: registries.zk.timeout -1s: must not be negative",
		"config: registries.zk.zookeeper.session_timeout -2s: must not be negative",
		"config: protocols.dubbo.port -1: want 0 (any free port) to 65535",
		"config: services.s.weight -1: must not be negative",
		"config: services.s.timeout -1s: must not be negative",
		"config: services.s.warmup -1s: must not be negative",
		"config: services.s.executes -1: must not be negative",
		"config: references.r.retries -1: must not be negative",
		"config: references.r.timeout -1s: must not be negative",
		"config: references.r.forks -1: must not be negative",
		"config: references.r.failback.retries -1: must not be negative",
		"config: references.r.failback.queue -2: must not be negative",
		"config: references.r.failback.backoff -1s: must not be negative",
		"config: references.r.failback.timeout -2s: must not be negative",
		"config: references.r.hash.nodes -1: must not be negative",
		"config: references.r.hash.arguments: index -1 must not be negative",
		"config: references.r.methods.M.timeout -1s: must not be negative",
		"config: references.r.methods.M.retries -1: must not be negative",
		"config: monitor.interval -1s: must be at least 1s",
		"config: monitor.buffer_reports -1: must not be negative",
		"config: monitor.buffer_bytes -1: must not be negative",
		"config: shutdown.timeout -1s: must not be negative",
		"config: shutdown.wait -2s: must not be negative",
	}, strings.Split(err.Error(), "\n"))
}

// A weight above protocol.MaxWeight is refused rather than capped quietly
// by the consumers that read it.
func TestWeightAboveMaxRefused(t *testing.T) {
	c, err := Parse(strings.NewReader(`
services:
  s: {interface: demo.S, weight: 2147483648}
`))
	require.Nil(t, c)
	require.EqualError(t, err, "config: services.s.weight 2147483648: must be at most 2147483647")
}
