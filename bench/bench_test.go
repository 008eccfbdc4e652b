package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// TestEcho serves every system in this process and makes calls of both
// payload sizes through a client of each, so a broken adapter fails here
// rather than in the middle of a run.
func TestEcho(t *testing.T) {
	for _, name := range systemNames() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, _ := lookup(name)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr, info, err := s.serve(ln)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.dial(ctx, addr, info, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{1, 581, 16 << 10} {
				req := bytes.Repeat([]byte{'q'}, n)
				for range 3 {
					resp, err := c.Call(ctx, req)
					if err != nil {
						t.Fatalf("%d bytes: %v", n, err)
					}
					if !bytes.Equal(resp, req) {
						t.Fatalf("%d bytes: reply of %d bytes differs", n, len(resp))
					}
				}
			}
		})
	}
}

func TestParseRows(t *testing.T) {
	rows, err := parseRows("1x581, 100x16384")
	if err != nil || len(rows) != 2 || rows[1] != (row{100, 16384}) || rows[1].String() != "100 @ 16 KiB" {
		t.Fatalf("%v %v", rows, err)
	}
	for _, bad := range []string{"", "1", "0x5", "1x0", "ax5", "1x99999999"} {
		if _, err := parseRows(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRatioCell(t *testing.T) {
	q := func(v ...float64) []result {
		var rs []result
		for _, x := range v {
			rs = append(rs, result{QPS: x})
		}
		return rs
	}
	// Per-round shares 0.5, 0.8, 0.6: median 0.6, not the ratio of the
	// medians (500/1000).
	if got, want := ratioCell(q(500, 400, 600), q(1000, 500, 1000), qpsShare), "0.60 (0.50–0.80)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// The share is taken within a round: raw slower in round 2 too.
	if got, want := ratioCell(q(500, 250), q(1000, 500), qpsShare), "0.50 (0.50–0.50)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := ratioCell(q(700), q(1000), qpsShare), "0.70"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := ratioCell(q(700), q(0), qpsShare), "0.00"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCPUShare(t *testing.T) {
	sys := result{ClientCPU: 12, ServerCPU: 8}
	raw := result{ClientCPU: 9, ServerCPU: 6}
	if got := cpuShare(sys, raw); got != 0.75 {
		t.Errorf("got %v, want 0.75", got)
	}
	if got := cpuShare(result{}, raw); got != 0 {
		t.Errorf("no CPU measured: got %v, want 0", got)
	}
}

// echoConn is a connection of the raw server in memory: it reads the
// prepared input, then io.EOF, and records the server's writes. Like
// *net.TCPConn it has a ReadFrom, which it counts.
type echoConn struct {
	net.Conn
	in        *bytes.Reader
	out       bytes.Buffer
	writes    []int
	readFroms int
}

func (c *echoConn) Read(p []byte) (int, error) { return c.in.Read(p) }
func (c *echoConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return c.out.Write(p)
}
func (c *echoConn) ReadFrom(r io.Reader) (int64, error) {
	c.readFroms++
	return io.Copy(struct{ io.Writer }{c}, r)
}
func (c *echoConn) Close() error { return nil }

// TestRawEchoWritesFullBuffers: the raw server echoes pipelined 16 KiB
// frames through its 64 KiB write buffer, writing whole buffers while more
// input is buffered, never a part of a frame on its own.
func TestRawEchoWritesFullBuffers(t *testing.T) {
	var in []byte
	for i := range 10 {
		in = binary.BigEndian.AppendUint32(in, 16<<10)
		in = binary.BigEndian.AppendUint64(in, uint64(i))
		in = append(in, bytes.Repeat([]byte{byte('a' + i)}, 16<<10)...)
	}
	c := &echoConn{in: bytes.NewReader(in)}
	rawEcho(c)
	if !bytes.Equal(c.out.Bytes(), in) {
		t.Fatalf("echoed %d bytes, not the %d sent", c.out.Len(), len(in))
	}
	if c.readFroms != 0 {
		t.Errorf("the socket's ReadFrom was used %d times", c.readFroms)
	}
	for i, n := range c.writes[:len(c.writes)-1] {
		if n != 64<<10 {
			t.Errorf("write %d of %d: %d bytes, want a full buffer of %d (writes %v)", i+1, len(c.writes), n, 64<<10, c.writes)
		}
	}
}

// TestRawFillsOneConnectionFirst: raw's client puts calls on its first
// connection until 16 are in flight there, then on the others, as
// minidubbo's consumer does. A server that holds every request until all
// have arrived shows where each went.
func TestRawFillsOneConnectionFirst(t *testing.T) {
	for _, tc := range []struct{ calls, wantFirst int }{{8, 8}, {40, -1}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		type arrival struct {
			from string
			hdr  [rawHeader]byte
			nc   net.Conn
		}
		arrived := make(chan arrival, tc.calls)
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					var a arrival
					for {
						if _, err := io.ReadFull(nc, a.hdr[:]); err != nil {
							return
						}
						if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(a.hdr[:4]))); err != nil {
							return
						}
						a.from, a.nc = nc.RemoteAddr().String(), nc
						arrived <- a
					}
				}()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := rawDial(ctx, ln.Addr().String(), "", 4)
		if err != nil {
			t.Fatal(err)
		}
		rc := c.(*rawClient)
		errs := make(chan error, tc.calls)
		for range tc.calls {
			go func() {
				_, err := c.Call(ctx, []byte("x"))
				errs <- err
			}()
		}
		per := map[string]int{}
		var all []arrival
		for range tc.calls {
			select {
			case a := <-arrived:
				per[a.from]++
				all = append(all, a)
			case <-ctx.Done():
				t.Fatalf("%d calls: only %d arrived", tc.calls, len(all))
			}
		}
		for _, a := range all { // answer every call: an empty reply
			hdr := a.hdr
			binary.BigEndian.PutUint32(hdr[:4], 0)
			if _, err := a.nc.Write(hdr[:]); err != nil {
				t.Fatal(err)
			}
		}
		for range tc.calls {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		first := per[rc.conns[0].nc.LocalAddr().String()]
		switch {
		case tc.wantFirst > 0 && first != tc.wantFirst:
			t.Errorf("%d calls: %d on the first connection, want all (%v)", tc.calls, first, per)
		case tc.wantFirst < 0 && (first < rawFill || len(per) < 2):
			t.Errorf("%d calls: %d on the first connection over %d connections, want at least %d there and the rest elsewhere (%v)", tc.calls, first, len(per), rawFill, per)
		}
		c.Close()
		ln.Close()
		cancel()
	}
}
