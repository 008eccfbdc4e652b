package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectURLsCheckedAtNew: a reference's url and the monitor's address
// are read by New as Refer and the reporter will read them, so that a
// mistake is said before anything runs, with what to write (a url
// without a port used to fail at Refer, "dubbo://20880": missing port).
func TestDirectURLsCheckedAtNew(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{References: map[string]ReferenceConfig{"r": {Interface: "demo.S", URL: "20880"}}},
			`config: references.r.url: "20880" names no port: write host:port, such as 127.0.0.1:20880`},
		{Config{References: map[string]ReferenceConfig{"r": {Interface: "demo.S", URL: "127.0.0.1:1,,127.0.0.1:2"}}},
			`config: references.r.url: "127.0.0.1:1,,127.0.0.1:2" has an empty entry: write host:port[,host:port...], such as 127.0.0.1:20880`},
		{Config{Monitor: MonitorConfig{Address: "monitor-host"}},
			`config: monitor.address: "monitor-host" names no port: write host:port, such as 127.0.0.1:20880`},
	} {
		_, err := New(&tc.cfg)
		require.EqualError(t, err, tc.want)
	}
	app, err := New(&Config{References: map[string]ReferenceConfig{"r": {Interface: "demo.S", URL: "127.0.0.1:20880, dubbo://127.0.0.2:20880"}}})
	require.NoError(t, err)
	require.NoError(t, app.Shutdown(t.Context()))
}
