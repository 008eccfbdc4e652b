package exchange_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/exchange"
)

// TestNowHasAMonotonicReading: exchange.Now's times carry a monotonic
// reading (so Sub and Until use it), never go back, and sit on the wall
// clock's time while nobody sets the clock.
func TestNowHasAMonotonicReading(t *testing.T) {
	a := exchange.Now()
	require.Contains(t, a.String(), " m=+", "a monotonic reading")
	b := exchange.Now()
	require.False(t, b.Before(a))
	wall := time.Now()
	d := wall.Round(0).Sub(a.Round(0)) // wall readings only
	require.True(t, d > -time.Second && d < time.Minute, "wall estimate off by %v", d)
	require.True(t, strings.HasPrefix(a.Add(time.Hour).Sub(a).String(), "1h0m0s"))
}
