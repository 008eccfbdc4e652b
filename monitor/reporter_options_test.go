package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReporterOptionsValidate(t *testing.T) {
	send := func(context.Context, *Report) error { return nil }
	for _, tc := range []struct {
		name string
		o    ReporterOptions
		want string // "" for valid
	}{
		{"zero but Send", ReporterOptions{Send: send}, ""},
		{"defaults", func() ReporterOptions { o := DefaultReporterOptions(); o.Send = send; return o }(), ""},
		{"minimum interval", ReporterOptions{Send: send, Interval: MinInterval}, ""},
		{"Send", ReporterOptions{}, "monitor: ReporterOptions.Send is nil (required)"},
		{"Interval below minimum", ReporterOptions{Send: send, Interval: time.Millisecond}, "monitor: report interval 1ms is below the minimum 1s (want 0 for the default 1m0s, or at least 1s)"},
		{"Interval negative", ReporterOptions{Send: send, Interval: -time.Second}, "monitor: report interval -1s is below the minimum 1s (want 0 for the default 1m0s, or at least 1s)"},
		{"SendTimeout", ReporterOptions{Send: send, SendTimeout: -time.Second}, "monitor: SendTimeout -1s is negative (want 0 for the default 5s, or more)"},
		{"BufferReports", ReporterOptions{Send: send, BufferReports: -1}, "monitor: BufferReports -1 is negative (want 0 for the default 60, or more)"},
		{"BufferBytes", ReporterOptions{Send: send, BufferBytes: -1}, "monitor: BufferBytes -1 is negative (want 0 for the default 8388608, or more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			r, newErr := NewReporter(New(), tc.o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				require.NoError(t, r.Close(testCtx(t)))
				return
			}
			require.EqualError(t, err, tc.want)
			require.Equal(t, err, newErr, "NewReporter refuses what Validate refuses")
		})
	}
}

func TestDefaultReporterOptions(t *testing.T) {
	require.Equal(t, ReporterOptions{
		Interval:      DefaultInterval,
		SendTimeout:   DefaultSendTimeout,
		BufferReports: DefaultBufferReports,
		BufferBytes:   DefaultBufferBytes,
	}, DefaultReporterOptions())
}
