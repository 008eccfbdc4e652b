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
