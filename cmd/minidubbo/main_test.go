package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestDispatch(t *testing.T) {
	_, errOut, code := runCLI(t, "bogus")
	assert.Equal(t, 2, code)
	assert.Equal(t, "minidubbo: unknown command \"bogus\" (known: invoke, lb, ls, monitor, report)\n", errOut)
	_, errOut, code = runCLI(t)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "usage: minidubbo <command>")
	out, _, code := runCLI(t, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "  lb       explore a load-balancing algorithm without servers\n")

	// A near miss, another name for a command, flags before the command.
	for args, want := range map[string]string{
		"invok": `minidubbo: unknown command "invok"; did you mean "invoke"? (known: invoke, lb, ls, monitor, report)`,
		"list":  `minidubbo: unknown command "list"; did you mean "ls"? (known: invoke, lb, ls, monitor, report)`,
		"-registry x ls": `minidubbo: unknown command "-registry"; the command comes first, then its flags: ` +
			`minidubbo <command> -registry ... (known: invoke, lb, ls, monitor, report)`,
	} {
		_, errOut, code := runCLI(t, strings.Fields(args)...)
		assert.Equal(t, 2, code, args)
		assert.Equal(t, want+"\n", errOut, args)
	}
	// help <command> is <command> -h.
	_, errOut, code = runCLI(t, "help", "ls")
	assert.Equal(t, 0, code)
	assert.Contains(t, errOut, "usage: minidubbo ls [flags]")
	assert.Contains(t, errOut, "-registry string")
}

// TestFlagErrors: a bad flag gets one line saying what is wrong and what
// the flag takes, for every command, not the flag package's error and the
// whole usage.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"ls -servce demo.Greeter", "minidubbo ls: unknown flag -servce; did you mean -service? (flags: -json, -registry, -service, -timeout)"},
		{"ls --registy zookeeper://h:1", "minidubbo ls: unknown flag -registy; did you mean -registry? (flags: -json, -registry, -service, -timeout)"},
		{"ls -timeout 5", `minidubbo ls: -timeout "5": -timeout takes a duration with a unit (ms, s, m, h), such as -timeout 5s`},
		{"ls -json=maybe", "minidubbo ls: -json=maybe: -json is true or false, written -json or -json=false"},
		{"ls -service", "minidubbo ls: -service needs a value (list only this interface), such as -service VALUE"},
		{"invoke -timeout", "minidubbo invoke: -timeout needs a duration with a unit (ms, s, m, h), such as -timeout 3s"},
		{"lb -n x", `minidubbo lb: -n "x": -n takes a whole number, such as -n 10`},
		{"report -by", "minidubbo report: -by needs a value (group rows by provider, consumer or method), such as -by VALUE"},
		{"monitor -htp :8080", "minidubbo monitor: unknown flag -htp; did you mean -http?"},
	} {
		out, errOut, code := runCLI(t, strings.Fields(tc.args)...)
		assert.Equal(t, 2, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.True(t, strings.HasPrefix(errOut, tc.want), "%s: %s", tc.args, errOut)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	}
}

func TestLBSequence(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-algo", "roundrobin", "-weights", "A=5,B=1,C=1", "-n", "7"}, "A\nA\nB\nA\nC\nA\nA\n"},
		{[]string{"-algo", "roundrobin", "-weights", "A=1,B=1,C=1", "-n", "4"}, "A\nB\nC\nA\n"},
		{[]string{"-algo", "leastactive", "-weights", "A=1,B=1,C=1", "-active", "A=3,B=0,C=1", "-n", "3"}, "B\nB\nB\n"},
		{[]string{"-algo", "shortestresponse", "-weights", "A=1,B=1", "-rt", "A=10ms,B=2ms", "-active", "B=9", "-n", "2"}, "A\nA\n"},
		{[]string{"-algo", "random", "-weights", "A=0,B=5", "-n", "3"}, "B\nB\nB\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"lb"}, tc.args...)...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, tc.want, out)
		})
	}
}

func TestLBJSON(t *testing.T) {
	out, _, code := runCLI(t, "lb", "-algo", "roundrobin", "-weights", "A=5,B=1,C=1", "-n", "7", "-format", "json")
	require.Equal(t, 0, code)
	assert.Equal(t, `{"algo":"roundrobin","sequence":["A","A","B","A","C","A","A"],"counts":{"A":5,"B":1,"C":1}}`+"\n", out)
}

func TestLBSeedRepeatable(t *testing.T) {
	args := []string{"lb", "-algo", "random", "-weights", "A=1,B=3", "-n", "2000", "-seed", "7", "-format", "json"}
	a, _, code := runCLI(t, args...)
	require.Equal(t, 0, code)
	b, _, _ := runCLI(t, args...)
	assert.Equal(t, a, b)
	var res struct {
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(a), &res))
	assert.Equal(t, 2000, res.Counts["A"]+res.Counts["B"])
	assert.InDelta(t, 500, res.Counts["A"], 100)
}

func TestLBConsistentHashKeys(t *testing.T) {
	out, _, code := runCLI(t, "lb", "-algo", "consistenthash", "-weights", "A=1,B=1,C=1", "-keys", "10000", "-remove", "B")
	require.Equal(t, 0, code)
	// MD5 rings are the same in every process, so the output is exact
	assert.Equal(t, `A 3120 31.20%
B 3306 33.06%
C 3574 35.74%
after removing B:
A 4573 45.73%
C 5427 54.27%
moved 3306 of 10000 keys (33.06%)
`, out)
	out, _, code = runCLI(t, "lb", "-algo", "consistenthash", "-weights", "A=1,B=1,C=1", "-keys", "10000", "-remove", "B", "-format", "json")
	require.Equal(t, 0, code)
	var res lbResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, 3306, res.Counts["B"])
	assert.InDelta(t, 0.3306, *res.Moved, 1e-9, "only B's keys move")
}

func TestLBErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-algo", "rr"}, `minidubbo lb: loadbalance: unknown "rr" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`},
		{[]string{"-weights", "A=x"}, `minidubbo lb: -weights: bad value "x" for A: want a whole number, 0 or more, such as A=100`},
		{[]string{"-weights", "A=1", "-algo", "leastactive", "-active", "A=many"}, `minidubbo lb: -active: bad value "many" for A: want a whole number of calls in flight, such as A=3`},
		{[]string{"-weights", "A=1", "-algo", "shortestresponse", "-rt", "A=10"}, `minidubbo lb: -rt: bad value "10" for A: want a duration with a unit, such as A=10ms`},
		{[]string{"-weights", "A=1,A=2"}, `minidubbo lb: -weights: "A" given twice`},
		{[]string{"-weights", "A"}, `minidubbo lb: -weights: "A" is not name=value`},
		{[]string{"-algo", "random", "-active", "A=1"}, `minidubbo lb: -active and -rt apply to leastactive, shortestresponse and p2c, not random`},
		{[]string{"-algo", "leastactive", "-active", "Z=1"}, `minidubbo lb: -active names "Z", which is not in -weights`},
		{[]string{"-keys", "10"}, `minidubbo lb: -keys and -remove apply to consistenthash, not random`},
		{[]string{"-algo", "consistenthash", "-keys", "10", "-remove", "Z"}, `minidubbo lb: -remove "Z" is not in -weights`},
		{[]string{"-format", "xml"}, `minidubbo lb: unknown -format "xml" (known: json, text)`},
		{[]string{"-format", "txt"}, `minidubbo lb: unknown -format "txt"; did you mean "text"? (known: json, text)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, append([]string{"lb"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Equal(t, tc.want+"\n", errOut)
		})
	}
}

// A service whose providers all stopped stays in ZooKeeper (its node is
// persistent, as in Dubbo); ls says why it lists one with no provider.
func TestLSExplainsNoProvider(t *testing.T) {
	var out bytes.Buffer
	printListing(&out, &lsListing{Services: []lsService{
		{Interface: "org.minidubbo.monitor.MonitorService"},
		{Interface: "demo.Greeter", Providers: []lsProvider{{Address: "10.0.0.1:20880", Weight: 100}}, Consumers: 1},
	}}, "/dubbo")
	assert.Equal(t, "org.minidubbo.monitor.MonitorService\n"+
		"  providers: 0 (none running; a service stays listed after its last provider stops)\n"+
		"  consumers: 0\n\n"+
		"demo.Greeter\n"+
		"  providers: 1\n"+
		"    10.0.0.1:20880 weight=100\n"+
		"  consumers: 1\n", out.String())
}
