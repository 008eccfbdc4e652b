package zookeeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/registry/zookeeper"
)

func TestOptionsValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    zookeeper.Options
		want string // "" for valid
	}{
		{"zero", zookeeper.Options{}, ""},
		{"defaults", zookeeper.DefaultOptions(), ""},
		{"root with slashes around", zookeeper.Options{Root: "/dubbo/"}, ""},
		{"SessionTimeout", zookeeper.Options{SessionTimeout: -time.Second}, "zookeeper registry: SessionTimeout -1s is negative (want 0 for the default 10s, or more)"},
		{"RetryMin", zookeeper.Options{RetryMin: -time.Second}, "zookeeper registry: RetryMin -1s is negative (want 0 for the default 200ms, or more)"},
		{"RetryMax", zookeeper.Options{RetryMax: -time.Second}, "RetryMax -1s"},
		{"Resync", zookeeper.Options{Resync: -time.Second}, "Resync -1s"},
		{"WatchdogTimeout", zookeeper.Options{WatchdogTimeout: -time.Second},
			"zookeeper registry: WatchdogTimeout -1s is negative (want 0 for the default, twice SessionTimeout and at least 10s, or more)"},
		{"EmptyGrace", zookeeper.Options{EmptyGrace: -time.Second}, "zookeeper registry: EmptyGrace -1s is negative (want 0 for the default, SessionTimeout, or more)"},
		{"RegisterWait", zookeeper.Options{RegisterWait: -time.Second},
			"zookeeper registry: RegisterWait -1s is negative (want 0 for the default, SessionTimeout and at most 3s, or more)"},
		{"MaxChildren", zookeeper.Options{MaxChildren: -1}, "zookeeper registry: MaxChildren -1 is negative (want 0 for the default 10000, or more)"},
		{"MaxBufferSize", zookeeper.Options{MaxBufferSize: -1}, "MaxBufferSize -1"},
		{"MaxBufferSize too small", zookeeper.Options{MaxBufferSize: 4096}, "MaxBufferSize 4096 is below 65536, too small for ZooKeeper's own answers"},
		{"Root", zookeeper.Options{Root: "a/b"}, "root \"a/b\" must be one path element"},
		{"Username", zookeeper.Options{Username: "u"}, "username and password must be set together"},
		{"Password", zookeeper.Options{Password: "p"}, "username and password must be set together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			tc.o.NoCacheFile = true
			r, newErr := zookeeper.New("127.0.0.1:1", tc.o)
			if r != nil {
				r.Close()
			}
			require.Equal(t, err, newErr, "New refuses what Validate refuses")
		})
	}
}

func TestDefaultOptions(t *testing.T) {
	d := zookeeper.DefaultOptions()
	require.Equal(t, zookeeper.DefaultSessionTimeout, d.SessionTimeout)
	require.Equal(t, zookeeper.DefaultRoot, d.Root)
	require.Equal(t, zookeeper.DefaultRetryMin, d.RetryMin)
	require.Equal(t, zookeeper.DefaultRetryMax, d.RetryMax)
	require.Equal(t, zookeeper.DefaultResync, d.Resync)
	require.Equal(t, zookeeper.DefaultMaxChildren, d.MaxChildren)
	require.Equal(t, zookeeper.DefaultMaxBufferSize, d.MaxBufferSize)
	// Derived from the session timeout.
	require.Equal(t, 20*time.Second, d.WatchdogTimeout)
	require.Equal(t, d.SessionTimeout, d.EmptyGrace)
	require.Equal(t, 3*time.Second, d.RegisterWait)
}
