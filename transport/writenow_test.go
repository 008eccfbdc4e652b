package transport_test

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// A frame given to WriteNow on an idle TCP connection is written by the
// calling goroutine: the writer goroutine makes no write.
func TestWriteNowWritesAlone(t *testing.T) {
	peer, nc := netConns(t)
	defer peer.Close()
	c := transport.NewConn(nc, newRecorder(false), nil)
	defer c.Close()
	require.NoError(t, peer.SetReadDeadline(deadline(t)))
	for i := range 5 {
		taken, err := c.WriteNow(frame(uint64(i), "alone"))
		require.True(t, taken)
		require.NoError(t, err)
		id, body := readFrame(t, peer)
		require.Equal(t, uint64(i), id)
		require.Equal(t, "alone", body)
	}
	require.Equal(t, uint64(5), transport.DirectWrites(c))
	require.Zero(t, transport.WriterWrites(c))
}

// WriteNow never waits for a peer that does not read: a frame larger than
// the socket takes is written in part, the rest goes to the writer ahead
// of anything queued after, and while that rest waits WriteNow leaves
// frames to the caller (false). Once the peer reads, every byte arrives
// whole and in order.
func TestWriteNowPartialRestGoesFirst(t *testing.T) {
	peer, nc := netConns(t)
	defer peer.Close()
	c := transport.NewConn(nc, newRecorder(false), &transport.Options{MaxPayload: 32 << 20})
	defer c.Close()
	big := strings.Repeat("0123456789abcdef", (16<<20)/16) // more than loopback's socket buffers
	taken, err := c.WriteNow(frame(1, big))
	require.True(t, taken, "nothing written or queued: the caller writes")
	require.NoError(t, err)
	f := frame(2, "after")
	taken, err = c.WriteNow(f)
	require.False(t, taken, "the rest of the first frame waits: the second is the caller's to queue")
	require.NoError(t, err)
	require.NoError(t, c.Send(f))
	require.Equal(t, uint64(1), transport.DirectWrites(c))

	require.NoError(t, peer.SetReadDeadline(deadline(t)))
	id, body := readFrame(t, peer)
	require.Equal(t, uint64(1), id)
	require.True(t, body == big, "the big frame arrives whole")
	id, body = readFrame(t, peer)
	require.Equal(t, uint64(2), id)
	require.Equal(t, "after", body)
}

// Connections that cannot write from the caller (pipes) and frames with
// spliced bytes are left to the caller's Send.
func TestWriteNowDeclines(t *testing.T) {
	a, b := pipePair(t, newRecorder(false), newRecorder(false))
	defer a.Close()
	defer b.Close()
	f := frame(1, "x")
	taken, err := a.WriteNow(f)
	require.False(t, taken)
	require.NoError(t, err)
	f.Release()

	peer, nc := netConns(t)
	defer peer.Close()
	c := transport.NewConn(nc, newRecorder(false), nil)
	defer c.Close()
	sf, _ := splicedFrame(1, "head", []byte("spliced"), "tail")
	taken, err = c.WriteNow(sf)
	require.False(t, taken)
	require.NoError(t, err)
	sf.Release()

	require.NoError(t, c.Close())
	f = frame(2, "late")
	taken, err = c.WriteNow(f)
	require.False(t, taken, "closed: Send reports the error")
	require.NoError(t, err)
	require.ErrorIs(t, c.Send(f), transport.ErrClosed)
}

// Many goroutines mixing WriteNow (falling back to Send) and Send: every
// frame arrives whole, once, and each goroutine's frames in its order;
// never two writers at once (the race detector watches the socket's
// hand-overs), and both paths are taken.
func TestWriteNowMixedWithQueued(t *testing.T) {
	peer, nc := netConns(t)
	defer peer.Close()
	c := transport.NewConn(nc, newRecorder(false), nil)
	const writers, each = 8, 200
	got := make(chan error, 1)
	go func() {
		// The peer checks every frame: its id says writer and sequence.
		next := make([]int, writers)
		for range writers * each {
			var h [transport.HeaderSize]byte
			if _, err := io.ReadFull(peer, h[:]); err != nil {
				got <- err
				return
			}
			id := int(h[11]) | int(h[10])<<8 | int(h[9])<<16
			n := int(h[12])<<24 | int(h[13])<<16 | int(h[14])<<8 | int(h[15])
			body := make([]byte, n)
			if _, err := io.ReadFull(peer, body); err != nil {
				got <- err
				return
			}
			w, seq := id/each, id%each
			if w >= writers || seq != next[w] || !bytes.Equal(body, bodyOf(id)) {
				got <- io.ErrUnexpectedEOF
				return
			}
			next[w]++
		}
		got <- nil
	}()
	require.NoError(t, peer.SetReadDeadline(deadline(t)))
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := w*each + i
				f := frame(uint64(id), string(bodyOf(id)))
				if i%2 == 0 {
					if taken, err := c.WriteNow(f); taken {
						if err != nil {
							t.Error(err)
							return
						}
						continue
					}
				}
				if err := c.Send(f); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, <-got)
	require.NotZero(t, transport.DirectWrites(c))
	require.NotZero(t, transport.WriterWrites(c))
	require.NoError(t, c.Close())
}

// bodyOf is the body of frame id in TestWriteNowMixedWithQueued: sizes
// from a few bytes to 64 KiB, so that some writes are partial.
func bodyOf(id int) []byte {
	n := (id * 7919) % (64 << 10)
	if id%10 != 0 {
		n %= 600
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id + i)
	}
	return b
}
