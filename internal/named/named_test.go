package named_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/named"
)

func TestTable(t *testing.T) {
	tb := named.New("widgets", "widget", map[string]int{"b": 2, "a": 1})
	v, err := tb.Get("a")
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	_, err = tb.Get("zz")
	assert.EqualError(t, err, `widgets: unknown widget "zz" (known: a, b)`)
	require.NoError(t, tb.Register("c", 3))
	assert.EqualError(t, tb.Register("c", 4), `widgets: register widget "c": name already taken`)
	assert.EqualError(t, tb.Register("", 4), `widgets: register widget: empty name`)
	assert.Equal(t, []string{"a", "b", "c"}, tb.Names())

	plain := named.New("loadbalance", "", map[string]int{"random": 1})
	_, err = plain.Get("rr")
	assert.EqualError(t, err, `loadbalance: unknown "rr" (known: random)`)
}

func TestTableConcurrent(t *testing.T) {
	tb := named.New[int]("widgets", "", nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_ = tb.Register(fmt.Sprint(i), i)
			for range 100 {
				_, _ = tb.Get("0")
				_ = tb.Names()
			}
		})
	}
	wg.Wait()
	assert.Len(t, tb.Names(), 16)
}
