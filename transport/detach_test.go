package transport_test

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// relay is a Handler that gives up reading with every frame: a new
// goroutine reads on (Resume) while the one that read the frame echoes it.
type relay struct {
	wg      sync.WaitGroup
	resumes atomic.Int32 // Resume calls that returned true
	ended   atomic.Int32 // Resume calls that returned false
	served  atomic.Int32
}

func (r *relay) Serve(c *transport.Conn, f *transport.Buffer) {
	c.Detach()
	r.wg.Go(func() {
		if c.Resume() {
			r.resumes.Add(1)
		} else {
			r.ended.Add(1)
		}
	})
	r.served.Add(1)
	_ = c.Send(f)
}

func (r *relay) Closed(*transport.Conn, error) {}

func TestDetachHandsReadingOn(t *testing.T) {
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			client, server := newRecorder(false), &relay{}
			a, b := pair(t, client, server)
			const n = 300
			for i := range n {
				require.NoError(t, a.Send(frame(uint64(i), "hello")))
			}
			seen := map[uint64]bool{}
			for range n {
				got := recv(t, ctx, client.frames)
				require.Equal(t, "hello", string(got[transport.HeaderSize:]))
				seen[binary.BigEndian.Uint64(got[4:12])] = true
			}
			require.Len(t, seen, n, "every frame echoed once")
			require.NoError(t, a.Close())
			require.Error(t, recvErr(t, ctx, client.closed))
			require.NoError(t, b.Close(), "Close waits for the goroutine that reads now")
			server.wg.Wait()
			require.Equal(t, int32(n), server.served.Load())
			require.Equal(t, int32(n-1), server.resumes.Load(), "each reader but the last detached once")
			require.Equal(t, int32(1), server.ended.Load(), "the last reader saw the end")
		})
	}
}

func TestResumeWithoutDetachPanics(t *testing.T) {
	a, b := pipePair(t, newRecorder(false), newRecorder(false))
	defer a.Close()
	defer b.Close()
	require.PanicsWithValue(t, "transport: Resume of a connection that is not detached", func() { a.Resume() })
}
