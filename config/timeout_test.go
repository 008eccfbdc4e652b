package config_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// clock reports how much time its caller's context has left.
type clock struct{}

func (clock) Left(ctx context.Context) (int64, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return -1, nil
	}
	return time.Until(dl).Milliseconds(), nil
}

type clockClient struct {
	Left func(ctx context.Context) (int64, error)
}

// TestTimeoutPrecedence: the consumer decides, the provider may only
// suggest. The consumer's method timeout, else its reference timeout, else
// the provider's advertised method timeout, then service timeout, else 1 s;
// whatever the registry holds is capped at 60 s; a sooner context deadline
// always wins. The provider's context shows the timeout the consumer sent.
func TestTimeoutPrecedence(t *testing.T) {
	huge := strconv.FormatInt(1<<62, 10)
	cases := []struct {
		name     string
		provider map[string]string // parameters laid over the provider's URL
		ref      config.ReferenceConfig
		ctx      time.Duration // caller's deadline (0: none)
		want     time.Duration
	}{
		{"provider service timeout", map[string]string{"timeout": "7000"}, config.ReferenceConfig{}, 0, 7 * time.Second},
		{"provider method timeout", map[string]string{"timeout": "7000", "Left.timeout": "9000"}, config.ReferenceConfig{}, 0, 9 * time.Second},
		{"consumer reference beats provider method", map[string]string{"Left.timeout": "9000"}, config.ReferenceConfig{Timeout: 3 * time.Second}, 0, 3 * time.Second},
		{"consumer method beats all", map[string]string{"Left.timeout": "9000"},
			config.ReferenceConfig{Timeout: 3 * time.Second, Methods: map[string]config.MethodConfig{"Left": {Timeout: 2 * time.Second}}}, 0, 2 * time.Second},
		{"huge provider value capped", map[string]string{"timeout": huge, "Left.timeout": huge}, config.ReferenceConfig{}, 0, 60 * time.Second},
		{"garbage provider value ignored", map[string]string{"timeout": "5000", "Left.timeout": "soon"}, config.ReferenceConfig{}, 0, 5 * time.Second},
		{"sooner context wins", map[string]string{"Left.timeout": "9000"}, config.ReferenceConfig{Timeout: 3 * time.Second}, 1500 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			reg := memory.New()
			defer reg.Close()
			prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Clock"}, config.ReferenceConfig{})
			u, err := prov.Export(ctx, "orders", clock{})
			require.NoError(t, err)
			// The registry holds what the provider (or anyone who can write
			// there) advertises.
			require.NoError(t, reg.Unregister(ctx, u))
			for k, v := range c.provider {
				u = u.With(k, v)
			}
			require.NoError(t, reg.Register(ctx, u))

			ref := c.ref
			ref.Interface, ref.Check = "test.Clock", true
			cons := memoryApp(t, reg, config.ServiceConfig{}, ref)
			var cl clockClient
			require.NoError(t, cons.Refer(ctx, "orders", &cl))
			callCtx := context.Background()
			if c.ctx > 0 {
				var cancel context.CancelFunc
				callCtx, cancel = context.WithTimeout(callCtx, c.ctx)
				defer cancel()
			}
			left, err := cl.Left(callCtx)
			require.NoError(t, err)
			require.LessOrEqual(t, left, c.want.Milliseconds())
			// Generous: only the choice of timeout is checked, not speed.
			require.Greater(t, left, c.want.Milliseconds()-1000, "the provider saw %d ms", left)
		})
	}
}
