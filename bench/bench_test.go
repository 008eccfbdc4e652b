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
