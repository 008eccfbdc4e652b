package zookeeper

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A frame length over 2 GiB (negative as ZooKeeper's Java int) ends the
// read with an error, as the handshake's answer and as any later answer,
// instead of reaching go-zookeeper: on a 32-bit platform its int is
// negative there, and slicing its buffer with it panics in the receive
// loop (the process dies). 2 GiB - 1 is a length like any other.
func TestFrameLengthOver2GiBRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length uint32
	}{{"2GiB", 1 << 31}, {"4GiB-1", 1<<32 - 1}} {
		t.Run("handshake/"+tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, _ := ln.Accept()
				accepted <- c
			}()
			nc, err := handshakeDialer(time.Minute, &sockets{}, nil)("tcp", ln.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			srv := <-accepted
			if srv == nil {
				t.Fatal("no connection accepted")
			}
			defer srv.Close()
			_ = nc.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := srv.Write(binary.BigEndian.AppendUint32(nil, tc.length)); err != nil {
				t.Fatal(err)
			}
			n, err := nc.Read(make([]byte, 64))
			if err == nil || !strings.Contains(err.Error(), "over 2 GiB") {
				t.Fatalf("read %d bytes, %v; want the length refused", n, err)
			}
		})
		t.Run("answer/"+tc.name, func(t *testing.T) {
			c, srv := gatePair(t, &sockets{}, nil)
			f := frame(-1, 0, 0) // a watch event's header: not held at the gate
			binary.BigEndian.PutUint32(f, tc.length)
			if _, err := srv.Write(f); err != nil {
				t.Fatal(err)
			}
			n, err := c.Read(make([]byte, 64))
			if err == nil || !strings.Contains(err.Error(), "over 2 GiB") {
				t.Fatalf("read %d bytes, %v; want the length refused", n, err)
			}
		})
	}
	// The largest length a Java int holds passes to go-zookeeper (which
	// bounds it by its MaxBufferSize), here with a watch event's header.
	c, srv := gatePair(t, &sockets{}, nil)
	f := frame(-1, 0, 0)
	binary.BigEndian.PutUint32(f, 1<<31-1)
	if _, err := srv.Write(f); err != nil {
		t.Fatal(err)
	}
	var l [4]byte
	if _, err := io.ReadFull(c, l[:]); err != nil || binary.BigEndian.Uint32(l[:]) != 1<<31-1 {
		t.Fatalf("read % x, %v; want the length handed over", l, err)
	}
}
