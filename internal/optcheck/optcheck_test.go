package optcheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNonNegative(t *testing.T) {
	require.NoError(t, NonNegative("p", Field{"A", 0, 5}, Field{"B", 3, time.Second}))
	require.EqualError(t, NonNegative("p", Field{"A", 1, 5}, Field{"B", -2, 5}, Field{"C", -1, 5}),
		"p: B -2 is negative (want 0 for the default 5, or more)")
	require.EqualError(t, NonNegative("p", Field{"D", int64(-time.Second), 2 * time.Second}),
		"p: D -1s is negative (want 0 for the default 2s, or more)")
	require.EqualError(t, NonNegative("p", Field{"M", -1, nil}),
		"p: M -1 is negative (want 0 for no limit, or more)")
	require.EqualError(t, NonNegative("p", Field{"T", int64(-time.Second), Said("the registry's default")}),
		"p: T -1s is negative (want 0 for the registry's default, or more)")
	require.EqualError(t, NonNegative("p", Field{"N", -3, "one per core"}),
		"p: N -3 is negative (want 0 for one per core, or more)")
}
