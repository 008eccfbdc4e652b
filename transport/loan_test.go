package transport_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// TestLoanSettledWhilePeerDoesNotRead: frames whose spliced bytes are lent
// (Buffer.Lend) give them back while the peer reads nothing at all. The
// first, which the writer took and could not write whole, is settled
// without any Settle (the writer copied what the socket did not take
// before it waited); the ones behind it, still queued, are withdrawn by
// Settle. The lender then overwrites its bytes, and when the peer reads at
// last it gets the first frame whole with the original bytes, nothing of
// the withdrawn ones, and the frame sent after them intact.
func TestLoanSettledWhilePeerDoesNotRead(t *testing.T) {
	kinds := map[string]func(t *testing.T) (net.Conn, net.Conn){
		"tcp": netConns,
		"pipe": func(*testing.T) (net.Conn, net.Conn) {
			a, b := net.Pipe()
			return a, b
		},
	}
	for name, conns := range kinds {
		t.Run(name, func(t *testing.T) {
			local, peer := conns(t)
			if tc, ok := peer.(*net.TCPConn); ok {
				require.NoError(t, tc.SetReadBuffer(64<<10))
			}
			c := transport.NewConn(local, newRecorder(false), nil)
			defer c.Close()
			defer peer.Close()

			// More than the socket's buffers take while nobody reads.
			const size = 6 << 20
			payloads := make([][]byte, 3)
			loans := make([]*transport.Loan, 3)
			for i := range payloads {
				payloads[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
				f, _ := splicedFrame(uint64(i+1), "head", payloads[i], "tail")
				loans[i] = new(transport.Loan)
				f.Lend(loans[i])
				require.True(t, f.Lent())
				require.NoError(t, c.Send(f))
			}
			// The writer takes the first frame and, unable to write it
			// whole, gives its bytes back before it waits for the peer.
			require.Eventually(t, func() bool { return transport.LoanPhase(loans[0]) == "done" },
				10*time.Second, time.Millisecond, "the writer holds lent bytes while it waits for the network")
			require.Equal(t, "queued", transport.LoanPhase(loans[1]), "test premise: the socket took frame 1 whole")
			require.Equal(t, "queued", transport.LoanPhase(loans[2]))
			for _, l := range loans {
				settled := make(chan struct{})
				go func() {
					l.Settle()
					close(settled)
				}()
				select {
				case <-settled:
				case <-time.After(10 * time.Second):
					t.Fatal("Settle waits for a peer that does not read")
				}
				require.Equal(t, "done", transport.LoanPhase(l))
			}
			for _, p := range payloads {
				for j := range p {
					p[j] = 'X'
				}
			}
			require.NoError(t, c.Send(frame(9, "after")))

			// The peer reads at last.
			require.NoError(t, peer.SetReadDeadline(time.Now().Add(20*time.Second)))
			var got []uint64
			for {
				var h [transport.HeaderSize]byte
				_, err := io.ReadFull(peer, h[:])
				require.NoError(t, err)
				require.Equal(t, transport.Magic, binary.BigEndian.Uint16(h[0:2]), "a frame boundary after frames %v", got)
				id := binary.BigEndian.Uint64(h[4:12])
				body := make([]byte, binary.BigEndian.Uint32(h[12:16]))
				_, err = io.ReadFull(peer, body)
				require.NoError(t, err)
				got = append(got, id)
				if id == 9 {
					require.Equal(t, "after", string(body))
					break
				}
				require.Equal(t, uint64(1), id, "frame %d was withdrawn", id)
				require.Len(t, body, len("head")+size+len("tail"))
				require.Equal(t, "head", string(body[:4]))
				require.Equal(t, "tail", string(body[len(body)-4:]))
				require.Zero(t, bytes.Count(body, []byte{'X'}), "bytes overwritten after Settle were sent")
				require.Equal(t, size, bytes.Count(body[4:len(body)-4], []byte{'a'}))
			}
			require.Equal(t, []uint64{1, 9}, got)
		})
	}
}

// TestLentFramesThroughAFullSocket: lent frames of many sizes, mixed with
// plain ones, sent while the peer reads in small pieces, so that the
// writer often finds the socket full in the middle of a batch and copies
// the lent bytes it has not written before it waits. Every loan ends
// without a Settle; the lender overwrites its bytes as soon as its loan
// has ended; every frame arrives whole and in order with the bytes it was
// sent with.
func TestLentFramesThroughAFullSocket(t *testing.T) {
	local, peer := netConns(t)
	require.NoError(t, peer.(*net.TCPConn).SetReadBuffer(32<<10))
	c := transport.NewConn(local, newRecorder(false), nil)
	defer c.Close()
	defer peer.Close()

	const n = 300
	want := make([][]byte, n)
	loans := make([]*transport.Loan, n)
	lent := make([][]byte, n)
	copiesBefore := transport.LentCopies()
	for i := range n {
		if i%5 == 4 {
			want[i] = []byte("plain")
			require.NoError(t, c.Send(frame(uint64(i), "plain")))
			continue
		}
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*7919)%70000)
		f, body := splicedFrame(uint64(i), "h", p, "t")
		loans[i], lent[i], want[i] = new(transport.Loan), p, body
		f.Lend(loans[i])
		require.NoError(t, c.Send(f))
	}

	got := make(chan []byte, n)
	readErr := make(chan error, 1)
	go func() {
		r := &smallReads{r: peer}
		for range n {
			var h [transport.HeaderSize]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				readErr <- err
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(h[12:16]))
			if _, err := io.ReadFull(r, body); err != nil {
				readErr <- err
				return
			}
			got <- append(h[4:12:12], body...)
		}
	}()

	for i, l := range loans {
		if l == nil {
			continue
		}
		require.Eventually(t, func() bool { return transport.LoanPhase(l) == "done" },
			20*time.Second, 100*time.Microsecond, "loan %d never ended", i)
		for j := range lent[i] {
			lent[i][j] = 'X'
		}
	}
	for i := range n {
		var b []byte
		select {
		case b = <-got:
		case err := <-readErr:
			t.Fatalf("frame %d: %v", i, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("frame %d never arrived", i)
		}
		require.Equal(t, uint64(i), binary.BigEndian.Uint64(b[:8]))
		require.True(t, bytes.Equal(want[i], b[8:]), "frame %d: %d bytes, want %d; overwritten bytes: %d", i, len(b)-8, len(want[i]), bytes.Count(b, []byte{'X'}))
	}
	t.Logf("lent bytes copied before a wait: %d", transport.LentCopies()-copiesBefore)
	require.NotZero(t, transport.LentCopies()-copiesBefore, "test premise: the socket was never full mid-batch")
}

// smallReads reads at most 2 KiB at a time: a slow peer.
type smallReads struct{ r io.Reader }

func (s *smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 2<<10)]) }

// TestHoldReleasesWithHolder: a buffer held by another (Buffer.Hold) is
// released when its holder is, not before; holding another releases the
// first. (The release shows as the end of the held buffer's loan.)
func TestHoldReleasesWithHolder(t *testing.T) {
	held := func(l *transport.Loan) *transport.Buffer {
		o := transport.GetBuffer()
		o.Splice([]byte("request bytes"))
		o.Lend(l)
		return o
	}
	var l1, l2 transport.Loan
	b := transport.GetBuffer()
	b.Hold(held(&l1))
	require.Equal(t, "queued", transport.LoanPhase(&l1))
	b.Hold(held(&l2))
	require.Equal(t, "done", transport.LoanPhase(&l1), "replaced: released")
	require.Equal(t, "queued", transport.LoanPhase(&l2))
	b.Release()
	require.Equal(t, "done", transport.LoanPhase(&l2), "released with its holder")
}
