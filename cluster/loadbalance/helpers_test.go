package loadbalance

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a provider that never gets called by the balancer tests.
type fake struct {
	u    *protocol.URL
	name string
}

func (f *fake) URL() *protocol.URL { return f.u }
func (f *fake) Invoke(context.Context, *protocol.Invocation) (*protocol.Result, error) {
	return &protocol.Result{Value: f.name}, nil
}

// providers builds invokers named A, B, C, ... with the given weights on
// hosts 10.0.0.1, 10.0.0.2, ...
func providers(weights ...int) []protocol.Invoker {
	out := make([]protocol.Invoker, len(weights))
	for i, w := range weights {
		out[i] = provider(i, w, nil)
	}
	return out
}

func provider(i, w int, extra map[string]string) protocol.Invoker {
	params := map[string]string{protocol.KeyWeight: strconv.Itoa(w)}
	for k, v := range extra {
		params[k] = v
	}
	return &fake{
		u:    protocol.NewURL("dubbo", fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 20880, "demo.Greeter", params),
		name: nameOf(i),
	}
}

func nameOf(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return "P" + strconv.Itoa(i)
}

func name(inv protocol.Invoker) string { return inv.(*fake).name }

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

func call(method string, args ...any) *protocol.Invocation {
	return &protocol.Invocation{Service: "demo.Greeter", Method: method, Args: args}
}

// chiSquare returns the statistic of observed counts against expected
// probabilities (entries with probability 0 must have count 0).
func chiSquare(t *testing.T, counts []int, probs []float64) float64 {
	t.Helper()
	total := 0
	for _, c := range counts {
		total += c
	}
	var x float64
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				t.Fatalf("index %d has probability 0 but was chosen %d times", i, counts[i])
			}
			continue
		}
		e := p * float64(total)
		d := float64(counts[i]) - e
		x += d * d / e
	}
	return x
}

// chiCritical001 holds the chi-square critical values at p = 0.001 by
// degrees of freedom.
var chiCritical001 = map[int]float64{1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322, 9: 27.877}
