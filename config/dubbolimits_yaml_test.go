package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry/memory"
	"github.com/minidubbo/minidubbo/status"
)

// TestYAMLMaxPayloadReachesTheProtocol: protocols.dubbo.max_payload in
// YAML is the limit the dubbo protocol applies, over the one given with
// WithProtocolOptions (1 MiB here): a 100 KiB request is refused before
// it is sent under the YAML's 64 KiB and goes through without the key.
func TestYAMLMaxPayloadReachesTheProtocol(t *testing.T) {
	ctx := testCtx(t)
	for _, limit := range []string{"max_payload: 65536", ""} {
		reg := memory.New()
		c, err := config.Parse(strings.NewReader(`
registries: {mem: {address: "memory://limits"}}
protocols: {dubbo: {` + limit + `}}
services: {blob: {interface: ` + blobInterface + `}}
references: {blob: {interface: ` + blobInterface + `, cluster: failfast, check: true}}
`))
		require.NoError(t, err)
		app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)),
			config.WithProtocolOptions(dubbo.Options{MaxPayload: 1 << 20}))
		require.NoError(t, err)
		b := &blob{}
		_, err = app.Export(ctx, "blob", b)
		require.NoError(t, err)
		var cl blobClient
		require.NoError(t, app.Refer(ctx, "blob", &cl))

		s, err := cl.Echo(ctx, strings.Repeat("y", 10<<10))
		require.NoError(t, err, limit)
		require.Len(t, s, 10<<10)
		_, err = cl.Echo(ctx, strings.Repeat("y", 100<<10))
		if limit != "" {
			require.ErrorIs(t, err, status.ErrPayloadTooLarge)
			require.Equal(t, int64(1), b.calls.Load(), "the request over max_payload never reached the provider")
		} else {
			require.NoError(t, err)
			require.Equal(t, int64(2), b.calls.Load())
		}
		require.NoError(t, app.Shutdown(ctx))
		require.NoError(t, reg.Close())
	}
}
