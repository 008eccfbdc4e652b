package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	require.NoError(t, Options{}.Validate())
	require.NoError(t, DefaultOptions().Validate())
	require.Equal(t, Options{Retention: DefaultRetention}, DefaultOptions())
	o := Options{Retention: -time.Hour}
	require.EqualError(t, o.Validate(), "store: Retention -1h0m0s is negative (want 0 for the default 168h0m0s, or more)")
	_, err := Open(t.TempDir(), o)
	require.Equal(t, o.Validate(), err, "Open refuses what Validate refuses")
}
