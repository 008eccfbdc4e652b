package hello_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelloFlagErrors: a bad flag value of the provider or the consumer
// is said with the flag first, then config's error (which names the YAML
// key the flag fills), and the program exits before dialling anything.
func TestHelloFlagErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := programs(t, ctx)
	for _, tc := range []struct {
		prog string
		args []string
		want string
	}{
		{"consumer", []string{"-loadbalance", "rando"}, `consumer: -loadbalance: config: references.greeter.loadbalance: unknown "rando"; did you mean "random"?`},
		{"consumer", []string{"-cluster", "failovr"}, `consumer: -cluster: config: references.greeter.cluster: unknown "failovr"; did you mean "failover"?`},
		{"consumer", []string{"-registry", ""}, `consumer: -registry: config: registries.default.address is empty`},
		{"consumer", []string{"-monitor", "foo", "-report-interval", "1s"}, `consumer: -monitor: config: monitor.address: "foo" names no port: write host:port, such as 127.0.0.1:20880`},
		{"provider", []string{"-port", "99999"}, `provider: -port: config: protocols.dubbo.port 99999: want 0 (any free port) to 65535`},
		{"provider", []string{"-registry", "zookeeper://127.0.0.1:99999"}, `provider: -registry: config: registries.default.address: zookeeper registry: address "zookeeper://127.0.0.1:99999": server "127.0.0.1:99999": port 99999 is out of range (1-65535`},
		{"provider", []string{"-report-interval", "10ms"}, `provider: -report-interval: config: monitor.interval 10ms: must be at least 1s`},
	} {
		args := tc.args
		if tc.prog == "consumer" {
			args = append(args, "-calls", "1") // one call, should the flag be taken
		}
		out, err := exec.CommandContext(ctx, filepath.Join(dir, tc.prog), args...).CombinedOutput()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%s %v exited 0: %s", tc.prog, tc.args, out)
		assert.True(t, strings.HasPrefix(string(out), tc.want), "%s %v:\n got %s\nwant %s", tc.prog, tc.args, out, tc.want)
	}
}
