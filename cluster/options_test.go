package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
)

func TestOptionsValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" for valid
	}{
		{"zero", Options{}, ""},
		{"defaults", DefaultOptions(), ""},
		{"no retries", Options{Retries: 0, MethodRetries: map[string]int{"M": 0}}, ""},
		{"Retries", Options{Retries: -1}, "cluster: Retries -1 is negative (want 0 for no retries, or more; DefaultOptions has 2)"},
		{"MethodRetries", Options{MethodRetries: map[string]int{"B": -2, "A": -1}}, `cluster: MethodRetries["A"] -1 is negative (want 0 for no retries, or more)`},
		{"Forks", Options{Forks: -1}, "cluster: Forks -1 is negative (want 0 for the default 2, or more)"},
		{"FailbackRetries", Options{FailbackRetries: -1}, "cluster: FailbackRetries -1 is negative (want 0 for the default 3, or more)"},
		{"FailbackQueue", Options{FailbackQueue: -1}, "cluster: FailbackQueue -1 is negative (want 0 for the default 100, or more)"},
		{"FailbackBackoff", Options{FailbackBackoff: -time.Second}, "cluster: FailbackBackoff -1s is negative (want 0 for the default 5s, or more)"},
		{"FailbackTimeout", Options{FailbackTimeout: -time.Second}, "cluster: FailbackTimeout -1s is negative (want 0 for the default 1s, or more)"},
		{"BalancerOptions", Options{BalancerOptions: []loadbalance.Option{loadbalance.WithVirtualNodes(-1)}}, "loadbalance: VirtualNodes -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, newErr := New(NewStatic(), tc.o)
			if tc.want == "" {
				require.NoError(t, tc.o.Validate())
				require.NoError(t, newErr)
				require.NoError(t, c.Close())
				return
			}
			require.ErrorContains(t, newErr, tc.want, "New refuses it")
			if err := tc.o.Validate(); err != nil {
				require.EqualError(t, err, tc.want)
			}
		})
	}
}

// The zero value and DefaultOptions differ only in Retries (literal zero).
func TestDefaultOptionsMatchZeroValue(t *testing.T) {
	zero, err := Options{}.withDefaults()
	require.NoError(t, err)
	def, err := DefaultOptions().withDefaults()
	require.NoError(t, err)
	require.Equal(t, 0, zero.Retries)
	require.Equal(t, DefaultRetries, def.Retries)
	for _, o := range []Options{zero, def} {
		require.Equal(t, DefaultStrategy, o.Strategy)
		require.Equal(t, DefaultForks, o.Forks)
		require.Equal(t, DefaultFailbackRetries, o.FailbackRetries)
		require.Equal(t, DefaultFailbackQueue, o.FailbackQueue)
		require.Equal(t, DefaultFailbackBackoff, o.FailbackBackoff)
		require.Equal(t, protocol.DefaultTimeout, o.FailbackTimeout)
	}
}
