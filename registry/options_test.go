package registry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/memory"
)

func TestDirectoryOptionsValidate(t *testing.T) {
	p := newFakeProtocol()
	ok := func(o registry.DirectoryOptions) registry.DirectoryOptions {
		o.Consumer, o.Protocol = cons(), p
		return o
	}
	for _, tc := range []struct {
		name string
		o    registry.DirectoryOptions
		want string // "" for valid
	}{
		{"zero but required", ok(registry.DirectoryOptions{}), ""},
		{"defaults", ok(registry.DefaultDirectoryOptions()), ""},
		{"Consumer", registry.DirectoryOptions{Protocol: p}, "registry: directory needs a consumer URL (DirectoryOptions.Consumer)"},
		{"Protocol", registry.DirectoryOptions{Consumer: cons()}, "registry: directory needs a protocol (DirectoryOptions.Protocol)"},
		{"DrainTimeout", ok(registry.DirectoryOptions{DrainTimeout: -time.Second}), "registry: DrainTimeout -1s is negative (want 0 for the default 10s, or more)"},
		{"Linger", ok(registry.DirectoryOptions{Linger: -time.Second}), "registry: Linger -1s is negative (want 0 for the default 1s, or more)"},
		{"ProtectCheck", ok(registry.DirectoryOptions{ProtectCheck: -time.Second}), "registry: ProtectCheck -1s is negative (want 0 for the default 1s, or more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			d, newErr := registry.NewDirectory(tc.o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				d.Close()
				return
			}
			require.EqualError(t, err, tc.want)
			require.Equal(t, err, newErr, "NewDirectory refuses what Validate refuses")
		})
	}
	require.Equal(t, registry.DirectoryOptions{
		DrainTimeout: registry.DefaultDrainTimeout,
		Linger:       registry.DefaultLinger,
		ProtectCheck: registry.DefaultProtectCheck,
	}, registry.DefaultDirectoryOptions())
}

func TestRegistryOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    registry.Options
		want string // "" for valid
	}{
		{"zero", registry.Options{}, ""},
		{"credentials", registry.Options{Username: "u", Password: "p"}, ""},
		{"SessionTimeout", registry.Options{SessionTimeout: -time.Second}, "registry: SessionTimeout -1s is negative (want 0 for the registry's default, or more)"},
		{"Username", registry.Options{Username: "u"}, "registry: Username and Password go together"},
		{"Password", registry.Options{Password: "p"}, "registry: Username and Password go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			table := registry.NewTable(map[string]registry.Factory{"memory": memory.Factory()})
			r, openErr := table.Open("memory://options", tc.o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, openErr)
				require.NoError(t, r.Close())
				return
			}
			require.EqualError(t, err, tc.want)
			require.Equal(t, err, openErr, "Table.Open refuses what Validate refuses")
		})
	}
}
