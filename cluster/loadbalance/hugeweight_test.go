package loadbalance

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
)

// TestHugeWeightsDoNotOverflow: weights are read from provider URLs (a
// registry anyone with write access fills); a weight near the int64 limit
// made the sums of the weighted balancers wrap, which sent every call of
// random and least-active to the wrong provider (weights 2^63-1, 2^63-1, 5:
// random picked the weight-5 one every time, least-active only the first)
// and skewed round robin. Weights are capped at protocol.MaxWeight.
func TestHugeWeightsDoNotOverflow(t *testing.T) {
	const picks = 3000
	const huge = math.MaxInt // 2^63-1 (2^31-1 on a 32-bit platform, where the int helper cannot say more)
	for _, ws := range [][]int{
		{huge, huge, 5},
		{huge, huge, huge, huge, huge, huge, huge, huge, huge, 3},
	} {
		for _, algo := range []string{Random, RoundRobin, LeastActive, ShortestResponse} {
			lb, err := Builtin().New(algo, WithSeed(1))
			require.NoError(t, err)
			p := lb.Build(providers(ws...))
			counts := make([]int, len(ws))
			for range picks {
				i, err := p.Pick(call("m"), nil)
				require.NoError(t, err, algo)
				counts[i]++
			}
			heavy := len(ws) - 1
			// the last provider's share is 5/(heavy*2^31-1): never in 3000 picks
			assert.Zero(t, counts[heavy], "%s %v: picks %v", algo, ws, counts)
			for i := range heavy { // the others share the calls evenly
				assert.Greater(t, counts[i], picks/heavy/2, "%s %v: picks %v", algo, ws, counts)
			}
		}
	}
}

func TestWeightCappedAndWarmupExact(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := func(w, warm string) *protocol.URL {
		return protocol.NewURL("dubbo", "h", 1, "s", map[string]string{
			protocol.KeyWeight: w, protocol.KeyWarmup: warm, protocol.KeyTimestamp: strconv.FormatInt(start.UnixMilli(), 10)})
	}
	year := 365 * 24 * time.Hour
	yearMs := strconv.FormatInt(year.Milliseconds(), 10)
	// half way through a year's warm-up: uptime×weight is 2^31×1.6e10 ms,
	// past int64; the weight is half the cap, not 1
	assert.Equal(t, protocol.MaxWeight/2, Weight(u(strconv.FormatInt(math.MaxInt64, 10), yearMs), start.Add(year/2)))
	assert.Equal(t, protocol.MaxWeight, Weight(u("99999999999999", yearMs), start.Add(year)))
	// a warm-up too long for a Duration saturates instead of turning negative (no warm-up)
	assert.Equal(t, 1, Weight(u("100", strconv.FormatInt(math.MaxInt64, 10)), start.Add(year)))
}
