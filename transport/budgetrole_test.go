package transport_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/transport"
)

// A Budget bounds a Server's requests or the answers of the connections
// Dial makes, never both: a handler that calls out while its request
// holds memory of it would wait for its reply to fit in memory its own
// request holds (with every worker doing the same: until the calls time
// out). So Dial refuses a Server's budget, and a Server one that Dial
// charges, saying what to use instead; sharing among Servers, or among
// dialed connections, stays allowed.
func TestBudgetIsServersOrDialsNotBoth(t *testing.T) {
	ctx := testCtx(t)
	served := transport.NewBudget(0)
	_, addr := serve(t, echoHandler{}, &transport.Options{Budget: served})
	_, addr2 := serve(t, echoHandler{}, &transport.Options{Budget: served})
	require.NotEqual(t, addr, addr2)

	c, err := transport.Dial(ctx, addr, echoHandler{}, &transport.Options{Budget: served})
	if err == nil {
		c.Close()
	}
	require.ErrorContains(t, err, "transport: Options.Budget is a Server's memory budget")
	require.ErrorContains(t, err, "exchange.Options.ReplyBudget, dubbo.Options.MaxReplyMemory")

	answers := transport.NewBudget(0)
	for _, a := range []string{addr, addr2} {
		c, err := transport.Dial(ctx, a, echoHandler{}, &transport.Options{Budget: answers})
		require.NoError(t, err)
		defer c.Close()
	}
	s := transport.NewServer(echoHandler{}, &transport.Options{Budget: answers})
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case err = <-done:
	case <-timeout.C:
		s.Close()
		<-done
		t.Fatal("a Server with a budget Dial charges serves")
	}
	require.ErrorContains(t, err, "transport: Options.Budget is charged by connections Dial made")
	require.NoError(t, s.Close())
}
