package exchange_test

import (
	"fmt"
	"testing"
	"time"
)

func TestZZDebugLed(t *testing.T) {
	ctx := testCtx(t)
	_, addr := serve(t, newEcho(), nil)
	c := dial(t, addr, nil)
	for i := range 2000 {
		resp, err := c.Call(ctx, time.Second, 27, request(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
	}
	t.Logf("led %d of 2000", c.Led())
}
