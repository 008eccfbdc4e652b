package monitor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHistogramWireRoundTrip(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for v := int64(1); v <= 1000; v++ {
		require.NoError(t, a.RecordValue(v*100))
		require.NoError(t, b.RecordValue(v))
	}
	merged := NewHistogram()
	require.NoError(t, EncodeHistogram(a).MergeInto(merged))
	require.NoError(t, EncodeHistogram(b).MergeInto(merged))
	require.Equal(t, int64(2000), merged.TotalCount())
	p50 := merged.ValueAtQuantile(50)
	require.InDelta(t, 1000, p50, 10) // 0.1 % of the 1000th value
	require.Error(t, Histogram{Index: []int32{1 << 30}, Count: []int64{1}}.MergeInto(merged))
	require.Error(t, Histogram{Index: []int32{1}}.MergeInto(merged))
}
