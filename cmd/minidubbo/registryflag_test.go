package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRegistryFlagErrors: a -registry value that names no ZooKeeper
// server, or a bad one, gets one line that names the flag and says what
// to write, before anything is dialled; invoke also names -url, the
// monitor its -registry "".
func TestRegistryFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "-registry", ""}, "minidubbo ls: -registry is empty: give a ZooKeeper address, " +
			"such as -registry zookeeper://127.0.0.1:2181 (leave -registry out for that one)"},
		{[]string{"invoke", "-registry", " ", "-service", "demo.Greeter", "-method", "SayHello"},
			"minidubbo invoke: -registry is empty: give a ZooKeeper address, such as -registry zookeeper://127.0.0.1:2181 " +
				"(leave -registry out for that one), or -url host:port to call a provider without a registry"},
		{[]string{"ls", "-registry", "zookeeper://127.0.0.1:99999"}, `minidubbo ls: -registry: zookeeper registry: ` +
			`address "zookeeper://127.0.0.1:99999": server "127.0.0.1:99999": port 99999 is out of range (1-65535; ZooKeeper's is usually 2181)`},
		{[]string{"invoke", "-registry", "zk://127.0.0.1:99999", "-service", "demo.Greeter", "-method", "SayHello"},
			`minidubbo invoke: -registry: zookeeper registry: address "zk://127.0.0.1:99999": server "127.0.0.1:99999": port 99999 is out of range`},
		{[]string{"invoke", "-registry", "etcd://127.0.0.1:2379", "-service", "demo.Greeter", "-method", "SayHello"},
			`minidubbo invoke: -registry: zookeeper registry: address "etcd://127.0.0.1:2379": unknown scheme "etcd" (known: zk, zookeeper)`},
		// The monitor takes -registry "" (no registry); anything else is
		// checked before its database or ports are opened.
		{[]string{"monitor", "-registry", "zookeeper://127.0.0.1:99999", "-http", "127.0.0.1:0", "-data", "/nonexistent/errs2"},
			`minidubbo monitor: -registry: zookeeper registry: address "zookeeper://127.0.0.1:99999": server "127.0.0.1:99999": port 99999 is out of range`},
		{[]string{"monitor", "-registry", " ", "-http", "127.0.0.1:0", "-data", "/nonexistent/errs2"},
			`minidubbo monitor: -registry is empty: give a ZooKeeper address, such as -registry zookeeper://127.0.0.1:2181 ` +
				`(leave -registry out for that one), or -registry "" for no registry`},
	} {
		out, errOut, code := runCLI(t, tc.args...)
		assert.Equal(t, 2, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.True(t, strings.HasPrefix(errOut, tc.want), "%q:\n got %s\nwant %s", tc.args, errOut, tc.want)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	}
}
