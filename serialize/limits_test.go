package serialize_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    serialize.Limits
		want string // "" for valid
	}{
		{"zero", serialize.Limits{}, ""},
		{"defaults", serialize.DefaultLimits(), ""},
		{"AllocFactor", serialize.Limits{AllocFactor: -1}, "serialize: AllocFactor -1 is negative (want 0 for the default 4, or more)"},
		{"AllocSlack", serialize.Limits{AllocSlack: -1}, "serialize: AllocSlack -1 is negative (want 0 for the default 65536, or more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				require.NoError(t, tc.l.Validate())
				return
			}
			require.EqualError(t, tc.l.Validate(), tc.want)
		})
	}
	require.Equal(t, serialize.Limits{AllocFactor: serialize.DefaultAllocFactor, AllocSlack: serialize.DefaultAllocSlack}, serialize.DefaultLimits())
}
