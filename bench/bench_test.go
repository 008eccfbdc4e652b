package main

import (
	"bytes"
	"context"
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
