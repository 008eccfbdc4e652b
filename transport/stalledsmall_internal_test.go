package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestStalledCutsOnlyChargedFrames: the budget's stalled rule (a dialed
// connection's frame that got nothing for a tenth of FrameTimeout while
// frames wait for room) closes the connection to get the frame's charge
// back. A connection this process made also watches its frames of up to
// 4 KiB (for Reading), which are never charged: cutting one of them gives
// nothing back, so the rule leaves it (to the calls behind it and to
// FrameTimeout). Two looks 200 ms apart (FrameTimeout 1 s) at a frame
// that got nothing: a 64 KiB one is cut, a 4 KiB one is not.
func TestStalledCutsOnlyChargedFrames(t *testing.T) {
	for _, tc := range []struct {
		size int64
		cut  bool
	}{{smallFrame - HeaderSize, false}, {64 << 10, true}} {
		_, nc := loopbackPair(t)
		c := &Conn{nc: nc, opts: &Options{FrameTimeout: time.Second, Logger: zap.NewNop()}, dialed: true, client: true, closing: make(chan struct{})}
		c.partSize.Store(tc.size)
		start := monoNow()
		c.partAt.Store(start)
		b := NewBudget(1 << 20)
		b.stalled(c, start, start)
		b.stalled(c, start+int64(200*time.Millisecond), start)
		cut := false
		select {
		case <-c.closing:
			cut = true
		default:
		}
		require.Equal(t, tc.cut, cut, "a stalled frame of %d bytes", tc.size)
	}
}
