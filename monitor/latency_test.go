package monitor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The atomic histogram puts every value in the bucket HdrHistogram puts
// it in, so its wire form decodes to the same histogram.
func TestLatencyMatchesHdrHistogram(t *testing.T) {
	l := newLatency()
	want := NewHistogram()
	values := []int64{0, 1, 2, 1023, 1024, 2047, 2048, 2049, 4095, 4096, 1e5, 1e6, 123456789, histHighest - 1, histHighest}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		values = append(values, r.Int64N(histHighest+1), r.Int64N(100000))
	}
	for _, v := range values {
		l.record(v)
		require.NoError(t, want.RecordValue(v))
	}
	got, err := l.take().Decode()
	require.NoError(t, err)
	assert.Equal(t, want.Export().Counts, got.Export().Counts)
	assert.Equal(t, want.TotalCount(), got.TotalCount())
	for _, q := range []float64{50, 90, 99, 99.9} {
		assert.Equal(t, want.ValueAtQuantile(q), got.ValueAtQuantile(q), "p%v", q)
	}
	assert.Empty(t, l.take().Index, "take empties it")
	l.record(-5) // clamped
	l.record(histHighest * 10)
	h, err := l.take().Decode()
	require.NoError(t, err)
	assert.EqualValues(t, 2, h.TotalCount())
}
