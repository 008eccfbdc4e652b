package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
	"github.com/stretchr/testify/require"
)

type dcInner struct {
	Tags []string
	M    map[string][]int
}

type dcOuter struct {
	Name  string
	In    *dcInner
	Ins   []dcInner
	Blobs [][]byte
	Any   any
	Self  *dcOuter
	priv  []int
}

// The copy shares nothing the caller can change: overwriting the original
// everywhere leaves the copy as it was.
func TestDeepCopySharesNothing(t *testing.T) {
	o := &dcOuter{
		Name:  "n",
		In:    &dcInner{Tags: []string{"a", "b"}, M: map[string][]int{"k": {1, 2}}},
		Ins:   []dcInner{{Tags: []string{"c"}}},
		Blobs: [][]byte{[]byte("xy")},
		Any:   []string{"any"},
		priv:  []int{7},
	}
	o.Self = o // a cycle ends
	c := deepCopy(o).(*dcOuter)
	require.NotSame(t, o, c)
	require.Same(t, c, c.Self)

	o.In.Tags[0] = "X"
	o.In.M["k"][0] = 9
	o.In.M["new"] = nil
	o.Ins[0].Tags[0] = "X"
	o.Blobs[0][0] = 'X'
	o.Any.([]string)[0] = "X"
	require.Equal(t, []string{"a", "b"}, c.In.Tags)
	require.Equal(t, map[string][]int{"k": {1, 2}}, c.In.M)
	require.Equal(t, []string{"c"}, c.Ins[0].Tags)
	require.Equal(t, "xy", string(c.Blobs[0]))
	require.Equal(t, []string{"any"}, c.Any)
	require.Equal(t, []int{7}, c.priv) // unexported: kept as it was

	for _, v := range []any{nil, 3, "s", []byte(nil), []int(nil), map[string]int(nil), (*dcInner)(nil), [2]string{"a", "b"}} {
		require.Equal(t, v, deepCopy(v))
	}
	s := []string{"q"}
	cs := deepCopy(s).([]string)
	s[0] = "X"
	require.Equal(t, []string{"q"}, cs)
}

type fbReq struct{ Data []byte }

type argRecorder struct {
	*fakeInvoker
	seen chan string
}

func (r *argRecorder) Invoke(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	switch a := inv.Args[0].(type) {
	case *fbReq:
		r.seen <- string(a.Data)
	case []string:
		r.seen <- a[0]
	}
	return r.fakeInvoker.Invoke(ctx, inv)
}

// Failback's background retry sends the arguments as they were when
// Invoke returned, whatever their shape, though the caller reuses them at
// once (-race reports the sharing too).
func TestFailbackRetryOwnsDeepArguments(t *testing.T) {
	for _, arg := range []any{&fbReq{Data: []byte("original")}, []string{"original"}} {
		fs := fakes(2)
		fs[0].answer = func(context.Context, int64) error { return status.ErrConnLost }
		seen := make(chan string, 4)
		b := &argRecorder{fakeInvoker: fs[1], seen: seen}
		c := newCluster(t, NewStatic(fs[0], b), Options{Strategy: Failback, LoadBalance: loadbalance.RoundRobin, FailbackBackoff: 50 * time.Millisecond})
		_, err := c.Invoke(testCtx(t), invocation("m", arg))
		require.NoError(t, err)
		switch a := arg.(type) {
		case *fbReq:
			copy(a.Data, "XXXXXXXX")
		case []string:
			a[0] = "XXXXXXXX"
		}
		select {
		case got := <-seen:
			require.Equal(t, "original", got, "%T: the retry read the caller's reused argument", arg)
		case <-testCtx(t).Done():
			t.Fatal("no background retry")
		}
	}
}
