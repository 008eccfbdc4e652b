package proxy_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
)

type echoer struct{}

func (echoer) Str(_ context.Context, s string) (string, error) { return "re:" + s, nil }
func (echoer) Raw(_ context.Context, b []byte) ([]byte, error) {
	return append([]byte("re:"), b...), nil
}

// Each call's Result holds its own reply (kept with the Result in one
// allocation): results kept from many calls stay as they were, through
// garbage collections.
func TestResultsKeepTheirReplies(t *testing.T) {
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "test.Echoer", nil), echoer{})
	require.NoError(t, err)
	var kept []*protocol.Result
	for i := range 100 {
		for _, inv := range []*protocol.Invocation{
			{Method: "Str", Args: []any{fmt.Sprint(i)}},
			{Method: "Raw", Args: []any{[]byte(fmt.Sprint(i))}},
		} {
			res, err := prov.Invoke(context.Background(), inv)
			require.NoError(t, err)
			kept = append(kept, res)
		}
	}
	runtime.GC()
	runtime.GC()
	for i := range 100 {
		require.Equal(t, "re:"+fmt.Sprint(i), kept[2*i].Value)
		require.Equal(t, []byte("re:"+fmt.Sprint(i)), kept[2*i+1].Value)
	}
}
