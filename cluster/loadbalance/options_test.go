package loadbalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want string // "" for valid
	}{
		{"zero", nil, ""},
		{"VirtualNodes", []Option{WithVirtualNodes(-1)}, "loadbalance: VirtualNodes -1 is negative (want 0 for the default 160, or more)"},
		{"HashArguments", []Option{WithHashArguments(0, -2)}, "loadbalance: HashArguments index -2 is negative (want argument indexes from 0)"},
		{"ProbeAfter", []Option{func(o *Options) { o.ProbeAfter = -time.Second }}, "loadbalance: ProbeAfter -1s is negative (want 0 for the default 5s, or more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			for _, f := range tc.opts {
				f(&o)
			}
			_, newErr := Builtin().New(ConsistentHash, tc.opts...)
			if tc.want == "" {
				require.NoError(t, o.Validate())
				require.NoError(t, newErr)
				return
			}
			require.EqualError(t, o.Validate(), tc.want)
			require.EqualError(t, newErr, tc.want, "Table.New refuses it")
		})
	}
	require.NoError(t, DefaultOptions().Validate())
}

// DefaultOptions states what the balancers do with zero fields.
func TestDefaultOptionsAreTheBalancersDefaults(t *testing.T) {
	d := DefaultOptions()
	b := NewConsistentHash(Options{})
	require.Equal(t, d.VirtualNodes, b.vnodes)
	require.Equal(t, d.HashArguments, b.args)
	require.Equal(t, d.ProbeAfter, Options{}.probeAfter())
}
