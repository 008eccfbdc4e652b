package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInvoker counts calls and answers from a script.
type fakeInvoker struct {
	u     *protocol.URL
	name  string
	calls atomic.Int64
	down  atomic.Bool
	// answer decides the outcome of call number n (from 1); nil succeeds.
	answer func(ctx context.Context, n int64) error
}

func (f *fakeInvoker) URL() *protocol.URL { return f.u }
func (f *fakeInvoker) Available() bool    { return !f.down.Load() }
func (f *fakeInvoker) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	n := f.calls.Add(1)
	if f.answer != nil {
		if err := f.answer(ctx, n); err != nil {
			return nil, err
		}
	}
	if r, ok := inv.Reply.(*string); ok {
		*r = f.name
		return &protocol.Result{Value: r}, nil
	}
	return &protocol.Result{Value: f.name}, nil
}

func fakes(n int) []*fakeInvoker {
	out := make([]*fakeInvoker, n)
	for i := range out {
		out[i] = &fakeInvoker{
			u:    protocol.NewURL("dubbo", fmt.Sprintf("127.0.0.%d", i+1), 20880, "demo.Greeter", nil),
			name: string(rune('A' + i)),
		}
	}
	return out
}

func static(fs []*fakeInvoker) *Static {
	s := make([]protocol.Invoker, len(fs))
	for i, f := range fs {
		s[i] = f
	}
	return NewStatic(s...)
}

func counts(fs []*fakeInvoker) []int64 {
	out := make([]int64, len(fs))
	for i, f := range fs {
		out[i] = f.calls.Load()
	}
	return out
}

func sum(c []int64) int64 {
	var s int64
	for _, x := range c {
		s += x
	}
	return s
}

func invocation(method string, args ...any) *protocol.Invocation {
	return &protocol.Invocation{Service: "demo.Greeter", Version: "1.0", Method: method, Args: args}
}

// swapDir is a directory whose list can be replaced concurrently.
type swapDir struct {
	mu sync.Mutex
	s  *Snapshot
}

func (d *swapDir) set(l []protocol.Invoker) {
	d.mu.Lock()
	var v uint64
	if d.s != nil {
		v = d.s.Version()
	}
	d.s = NewSnapshot(v+1, l)
	d.mu.Unlock()
}
func (d *swapDir) Snapshot() *Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s == nil {
		return NewSnapshot(0, nil)
	}
	return d.s
}

func newCluster(t *testing.T, dir Directory, o Options) *Invoker {
	t.Helper()
	c, err := New(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
