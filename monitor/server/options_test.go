package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/monitor/store"
)

func TestOptionsValidate(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" for valid
	}{
		{"zero", Options{}, ""},
		{"defaults", DefaultOptions(), ""},
		{"MaxSeries", Options{MaxSeries: -1}, "monitor server: MaxSeries -1 is negative (want 0 for the default 10000, or more)"},
		{"Refresh", Options{Refresh: -time.Second}, "monitor server: Refresh -1s is negative (want 0 for the default 5s, or more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			srv, newErr := New(st, tc.o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				require.Positive(t, srv.opts.MaxSeries)
				require.Positive(t, srv.opts.Refresh)
				return
			}
			require.EqualError(t, err, tc.want)
			require.Equal(t, err, newErr, "New refuses what Validate refuses")
		})
	}
	require.Equal(t, Options{MaxSeries: DefaultMaxSeries, Refresh: DefaultRefresh}, DefaultOptions())

	// A nil store is an error at New, not a panic at the first report.
	srv, err := New(nil, Options{})
	require.Nil(t, srv)
	require.EqualError(t, err, "monitor server: nil store (open one with store.Open)")
}
