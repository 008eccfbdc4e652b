package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLab runs the lab in-process on a small load and checks the tables,
// that round robin gives the slow provider exactly its share while least
// active and p2c send it less, and that the chart is well-formed SVG.
func TestLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := config{providers: 3, slow: 1, delay: 20 * time.Millisecond, base: time.Millisecond,
		calls: 600, concurrency: 8, algos: []string{"roundrobin", "leastactive", "p2c"}}
	var out bytes.Buffer
	reports, err := run(ctx, c, &out)
	require.NoError(t, err)
	require.Len(t, reports, 3)
	text := out.String()
	assert.True(t, strings.HasPrefix(text, "3 providers on loopback: p1=1ms p2=1ms p3=20ms; 600 calls per algorithm, 8 at a time\n"), text)
	for _, a := range c.algos {
		assert.Contains(t, text, "\n"+a+"\n  provider  delay  calls  share peak busy\n")
	}
	for _, r := range reports {
		assert.Equal(t, 0, r.errors, r.algo)
		assert.Equal(t, 600, r.counts["p1"]+r.counts["p2"]+r.counts["p3"], r.algo)
		assert.LessOrEqual(t, r.p50, r.p99)
	}
	rr, la, p2c := reports[0], reports[1], reports[2]
	assert.Equal(t, map[string]int{"p1": 200, "p2": 200, "p3": 200}, rr.counts, "round robin ignores speed")
	assert.Less(t, la.counts["p3"], rr.counts["p3"], "leastactive routes around the slow provider")
	assert.Less(t, p2c.counts["p3"], rr.counts["p3"], "p2c routes around the slow provider")

	svg := chart(c, reports)
	d := xml.NewDecoder(strings.NewReader(svg))
	rects := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	assert.GreaterOrEqual(t, rects, 1+3+3, "background, bars and legend")
	assert.Contains(t, svg, ">roundrobin</text>")
}

func TestLabBadConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := run(ctx, config{providers: 2, calls: 1, concurrency: 1, algos: []string{"rr"}}, io.Discard)
	require.EqualError(t, err, `-algos: loadbalance: unknown "rr" (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`)
	_, err = run(ctx, config{providers: 2, calls: 1, concurrency: 1, algos: []string{"random", "roundrobn"}}, io.Discard)
	require.EqualError(t, err, `-algos: loadbalance: unknown "roundrobn"; did you mean "roundrobin"? (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`)
	_, err = run(ctx, config{providers: 2, slow: 3, calls: 1, concurrency: 1}, io.Discard)
	require.Error(t, err)
}
