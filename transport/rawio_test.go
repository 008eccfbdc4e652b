package transport_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// The read loop's reader of a TCP socket (a raw read(2) through its
// RawConn on Linux) reads what arrives, waits for more, honours read
// deadlines, and ends with io.EOF when the peer closes and net.ErrClosed
// when its own end is closed, as net.Conn's Read does.
func TestSocketReaderLikeConnRead(t *testing.T) {
	a, b := netConns(t)
	defer a.Close()
	r := transport.NewSocketReader(a)
	if runtime.GOOS == "linux" {
		require.NotEqual(t, a, r, "Linux reads a TCP socket with raw reads")
	}
	buf := make([]byte, 64)

	require.NoError(t, a.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	n, err := r.Read(buf)
	require.Zero(t, n)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, a.SetReadDeadline(time.Time{}))

	n, err = r.Read(buf[:0])
	require.Zero(t, n)
	require.NoError(t, err)

	go func() { _, _ = b.Write([]byte("hello")) }()
	_, err = io.ReadFull(r, buf[:5])
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf[:5]))

	// A read waits for data that comes later.
	got := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(r, buf[:3])
		got <- err
	}()
	_, err = b.Write([]byte("abc"))
	require.NoError(t, err)
	require.NoError(t, <-got)
	require.Equal(t, "abc", string(buf[:3]))

	require.NoError(t, b.Close())
	n, err = r.Read(buf)
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF)

	c, d := netConns(t)
	defer d.Close()
	rc := transport.NewSocketReader(c)
	require.NoError(t, c.Close())
	_, err = rc.Read(buf)
	require.ErrorIs(t, err, net.ErrClosed)
}

// A batch larger than the socket takes at once is written whole, in order,
// while the peer reads slowly: the writer waits for room and goes on from
// where the kernel stopped, within a buffer too.
func TestWriteAllLargeBatch(t *testing.T) {
	a, b := netConns(t)
	defer a.Close()
	defer b.Close()
	var want []byte
	var bufs [][]byte
	for i := range 300 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i*97%40000)
		if i%50 == 7 {
			p = nil // empty pieces are passed over
		}
		bufs = append(bufs, p)
		want = append(want, p...)
	}
	read := make(chan []byte, 1)
	go func() {
		got := make([]byte, 0, len(want))
		chunk := make([]byte, 1500)
		for len(got) < len(want) {
			n, err := b.Read(chunk)
			if err != nil {
				break
			}
			got = append(got, chunk[:n]...)
		}
		read <- got
	}()
	require.NoError(t, transport.WriteAll(a, bufs))
	require.Equal(t, want, <-read)
}

// A write to a peer that has gone fails with the socket's error.
func TestWriteAllPeerGone(t *testing.T) {
	a, b := netConns(t)
	defer a.Close()
	require.NoError(t, b.Close())
	p := make([]byte, 1<<20)
	var err error
	for range 50 {
		if err = transport.WriteAll(a, [][]byte{p, p}); err != nil {
			break
		}
	}
	require.Error(t, err)
	var oe *net.OpError
	require.True(t, errors.As(err, &oe) || errors.Is(err, net.ErrClosed), "%v", err)

	// And a write on an end closed here says so.
	c, d := netConns(t)
	defer d.Close()
	require.NoError(t, c.Close())
	require.ErrorIs(t, transport.WriteAll(c, [][]byte{[]byte("x")}), net.ErrClosed)
}
