//go:build unix

package transport_test

import (
	"io"
	"net"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// fdFlags returns the file status flags of nc's socket.
func fdFlags(t *testing.T, nc net.Conn) uintptr {
	t.Helper()
	raw, err := nc.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var fl uintptr
	var e syscall.Errno
	require.NoError(t, raw.Control(func(fd uintptr) {
		fl, _, e = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}))
	require.Zero(t, e)
	return fl
}

// unixConns gives both ends of a new Unix socket connection: the
// dialled one and the accepted one.
func unixConns(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	return socketPair(t, "unix", filepath.Join(t.TempDir(), "s"))
}

// Every socket the transport reads and writes raw is non-blocking: dialled
// and accepted, TCP and Unix. A raw read(2) or write(2) on Linux is made
// without the runtime's syscall bookkeeping, so it must never wait in the
// kernel (a stop-the-world would wait for it).
func TestSocketsAreNonBlocking(t *testing.T) {
	td, ta := netConns(t)
	ud, ua := unixConns(t)
	for name, c := range map[string]net.Conn{"tcp dialled": td, "tcp accepted": ta, "unix dialled": ud, "unix accepted": ua} {
		t.Cleanup(func() { c.Close() })
		require.NotZero(t, fdFlags(t, c)&syscall.O_NONBLOCK, "%s socket is blocking", name)
		require.True(t, transport.HasDirectWrite(c), "%s: raw writes", name)
		if runtime.GOOS == "linux" {
			require.NotEqual(t, c, transport.NewSocketReader(c), "%s: raw reads", name)
		}
	}
}

// A socket its owner put in blocking mode is read and written through
// net.Conn, never with raw system calls: a raw read of it would wait in the
// kernel for the peer without the runtime knowing, and every garbage
// collection would stall the process until the peer sent something (the
// old code read it raw).
func TestBlockingSocketNotUsedRaw(t *testing.T) {
	for name, pair := range map[string]func(*testing.T) (net.Conn, net.Conn){"tcp": netConns, "unix": unixConns} {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t)
			defer a.Close()
			defer b.Close()
			raw, err := a.(syscall.Conn).SyscallConn()
			require.NoError(t, err)
			var serr error
			require.NoError(t, raw.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }))
			require.NoError(t, serr)
			require.Zero(t, fdFlags(t, a)&syscall.O_NONBLOCK)

			require.Equal(t, a, transport.NewSocketReader(a), "a blocking socket is read through net.Conn")
			require.False(t, transport.HasDirectWrite(a), "a blocking socket is written through net.Conn")

			// And a Conn over it still works both ways.
			_, err = b.Write([]byte("ping"))
			require.NoError(t, err)
			buf := make([]byte, 4)
			_, err = io.ReadFull(transport.NewSocketReader(a), buf)
			require.NoError(t, err)
			require.Equal(t, "ping", string(buf))
			require.NoError(t, transport.WriteAll(a, [][]byte{[]byte("po"), []byte("ng")}))
			_, err = io.ReadFull(b, buf)
			require.NoError(t, err)
			require.Equal(t, "pong", string(buf))
		})
	}
}
