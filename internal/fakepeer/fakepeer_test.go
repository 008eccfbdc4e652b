package fakepeer

import (
	"bytes"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/exchange"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func frame(h exchange.Header, body string) []byte {
	h.Length = uint32(len(body))
	b := make([]byte, exchange.HeaderSize, exchange.HeaderSize+len(body))
	h.Put(b)
	return append(b, body...)
}

// TestListenServesAndCleansUp: each connection gets a serve of its own;
// at the test's end a serve blocked reading and one blocked on quit both
// return, and so does the accepting goroutine (goleak, after the
// subtest's cleanup).
func TestListenServesAndCleansUp(t *testing.T) {
	served := make(chan string, 2)
	t.Run("peer", func(t *testing.T) {
		addr := Listen(t, func(nc net.Conn, quit <-chan struct{}) {
			h, body, err := ReadFrame(nc)
			if err != nil {
				return
			}
			served <- string(body)
			if _, err := nc.Write(frame(exchange.Header{Serializer: h.Serializer, ID: h.ID}, string(body))); err != nil {
				return
			}
			if string(body) == "wait" {
				<-quit
				return
			}
			_, _, _ = ReadFrame(nc) // blocked until the cleanup closes nc
		})
		for _, s := range []string{"read", "wait"} {
			nc, err := net.Dial("tcp", addr.String())
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = nc.Write(frame(exchange.Header{Request: true, TwoWay: true, Serializer: 2, ID: 7}, s))
			require.NoError(t, err)
			h, body, err := ReadFrame(nc)
			require.NoError(t, err)
			require.Equal(t, uint64(7), h.ID)
			require.Equal(t, s, string(body))
		}
	})
	close(served)
	var got []string
	for s := range served {
		got = append(got, s)
	}
	require.ElementsMatch(t, []string{"read", "wait"}, got)
}

// TestListenNilServeHolds: with no serve the connections are accepted
// and held until the test ends, then closed.
func TestListenNilServeHolds(t *testing.T) {
	var nc net.Conn
	t.Run("peer", func(t *testing.T) {
		addr := Listen(t, nil)
		var err error
		nc, err = net.Dial("tcp", addr.String())
		require.NoError(t, err)
	})
	defer nc.Close()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := nc.Read(make([]byte, 1))
	// EOF once accepted; reset when the listener closed before its
	// Accept: either way not held past the test.
	require.Error(t, err)
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "closed by the cleanup")
}

// TestListenOnAnotherLoopback: ListenOn listens on the address asked
// for, and a peer that dials it is accepted from its own loopback address
// and served.
func TestListenOnAnotherLoopback(t *testing.T) {
	from := make(chan string, 1)
	addr := ListenOn(t, "127.0.0.2", func(nc net.Conn, quit <-chan struct{}) {
		from <- nc.LocalAddr().(*net.TCPAddr).IP.String()
		<-quit
	})
	require.Equal(t, "127.0.0.2", addr.IP.String())
	nc, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer nc.Close()
	select {
	case ip := <-from:
		require.Equal(t, "127.0.0.2", ip)
	case <-time.After(10 * time.Second):
		t.Fatal("not served")
	}
}

func TestReadAndSkipFrame(t *testing.T) {
	two := append(frame(exchange.Header{ID: 1}, "abc"), frame(exchange.Header{ID: 2, Event: true}, "de")...)
	r := bytes.NewReader(two)
	h, err := SkipFrame(r)
	require.NoError(t, err)
	require.Equal(t, uint64(1), h.ID)
	h, body, err := ReadFrame(r)
	require.NoError(t, err)
	require.True(t, h.Event)
	require.Equal(t, "de", string(body))
	_, _, err = ReadFrame(r)
	require.ErrorIs(t, err, io.EOF)

	short := frame(exchange.Header{ID: 3}, "abc")
	_, _, err = ReadFrame(bytes.NewReader(short[:len(short)-1]))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = SkipFrame(bytes.NewReader(short[:len(short)-1]))
	require.ErrorIs(t, err, io.EOF)
	_, err = SkipFrame(bytes.NewReader(make([]byte, exchange.HeaderSize)))
	require.Error(t, err, "no magic: not a header")
}
