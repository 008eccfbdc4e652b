package dubbo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/status"
)

type shipment struct {
	To     string `msgpack:"to"`
	Weight int    `msgpack:"weight"`
}

// shop has methods whose arguments are a string, an integer and a struct.
type shop struct{}

func (shop) Find(_ context.Context, name string) (string, error)    { return "found " + name, nil }
func (shop) Double(_ context.Context, n int64) (int64, error)       { return 2 * n, nil }
func (shop) Ship(_ context.Context, s shipment) (string, error)     { return "to " + s.To, nil }
func (shop) Label(_ context.Context, b []byte) (int, error)         { return len(b), nil }
func (shop) Tally(_ context.Context, m map[string]int) (int, error) { return len(m), nil }

// TestWrongKindOfArgument: an argument of the wrong kind, sent as a
// generic caller (or the CLI) sends it, comes back as a bad request that
// names the argument, the kind that came and the kind the method takes
// (it said "msgpack: invalid code=2a decoding string/bytes length"); a
// reply decoded into the wrong type says the same on the consumer, where
// the *serialize.TypeError stays in the chain.
func TestWrongKindOfArgument(t *testing.T) {
	ctx := testCtx(t)
	p := newProtocol(t, nil)
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Shop", nil), shop{})
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	inv := refer(t, p, exp.(*dubbo.Exporter).URL())

	for _, tc := range []struct {
		method string
		arg    any
		want   string
	}{
		{"Find", 42, "bad request: dubbo: demo.Shop.Find(string) argument 0 (string): serialize: got an integer (42), expected a string"},
		{"Find", map[string]any{"name": "x"}, "argument 0 (string): serialize: got a map, expected a string"},
		{"Double", "7", `argument 0 (int64): serialize: got a string ("7"), expected an integer`},
		{"Double", 1.5, "argument 0 (int64): serialize: got a float (1.5), expected an integer"},
		{"Ship", "home", `argument 0 (dubbo_test.shipment): serialize: got a string ("home"), expected a map`},
		{"Ship", map[string]any{"to": "home", "weight": "heavy"}, `argument 0 (dubbo_test.shipment): serialize: weight: got a string ("heavy"), expected an integer (int)`},
		{"Label", true, "argument 0 ([]uint8): serialize: got a boolean (true), expected bytes or a string"},
		{"Tally", []any{1, 2}, "argument 0 (map[string]int): serialize: got an array, expected a map"},
	} {
		_, err := inv.Invoke(ctx, &protocol.Invocation{Method: tc.method, Args: []any{tc.arg}})
		require.ErrorIs(t, err, status.ErrBadRequest, tc.method)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "code=", "the decoder's code stays out of the text")
	}

	// The right kinds go through.
	var n int64
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Double", Args: []any{int64(21)}, Reply: &n})
	require.NoError(t, err)
	require.Equal(t, int64(42), n)

	// A reply of another kind than the consumer's type.
	var wrong int
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Find", Args: []any{"a"}, Reply: &wrong})
	require.ErrorIs(t, err, status.ErrBadResponse)
	var te *serialize.TypeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, `got a string ("found a")`, "got "+te.Got)
	require.ErrorContains(t, err, `serialize: got a string ("found a"), expected an integer`)
}

// TestNotFoundSaysWhatToCheck: a call to a method the service lacks gets
// the nearest name and the service's methods; a call to a service the
// port does not serve (here: another version) gets the versions and
// groups the port serves that interface with, the nearest first, and at
// most five; a call to an interface the port does not serve at all is
// told to check the name. No answer names the port's other interfaces.
func TestNotFoundSaysWhatToCheck(t *testing.T) {
	ctx := testCtx(t)
	p := newProtocol(t, nil)
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Shop", map[string]string{protocol.KeyVersion: "1.0"}), shop{})
	require.NoError(t, err)
	exp, err := p.Export(prov)
	require.NoError(t, err)
	u := exp.(*dubbo.Exporter).URL()
	// On the same port: the same interface in group eu, and another one.
	for _, o := range []struct{ iface, version, group string }{{"demo.Shop", "1.0", "eu"}, {"demo.Vault", "1.0", ""}} {
		prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", u.Port, o.iface,
			map[string]string{protocol.KeyVersion: o.version, protocol.KeyGroup: o.group}), shop{})
		require.NoError(t, err)
		_, err = p.Export(prov)
		require.NoError(t, err)
	}

	inv := refer(t, p, u)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Doubel", Args: []any{1}})
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	require.ErrorContains(t, err, `dubbo: service demo.Shop:1.0 has no method "Doubel"; did you mean "Double"? (it has: Double, Find, Label, Ship, Tally)`)
	_, err = inv.Invoke(ctx, &protocol.Invocation{Method: "Refund", Args: []any{1}})
	require.ErrorContains(t, err, `dubbo: service demo.Shop:1.0 has no method "Refund" (it has: Double, Find, Label, Ship, Tally)`)

	port := strconv.Itoa(u.Port)
	other := refer(t, p, u.With(protocol.KeyVersion, "2.0").With(protocol.KeyGroup, "eu"))
	_, err = other.Invoke(ctx, &protocol.Invocation{Method: "Double", Args: []any{1}})
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	require.ErrorContains(t, err, `dubbo: no service eu/demo.Shop:2.0 on port `+port+`; it serves demo.Shop with `+
		`version "1.0" and group "eu"; version "1.0" and no group `+
		`(a service is found by its interface, version and group together)`)
	require.NotContains(t, err.Error(), "Vault", "the port's other interfaces are not named")
	require.NotContains(t, err.Error(), "Double,", "nor the service's methods")
	require.NotContains(t, err.Error(), "minidubbo ls", "the call may have been made by address")

	typo := refer(t, p, u.With(protocol.KeyInterface, "demo.Shp"))
	_, err = typo.Invoke(ctx, &protocol.Invocation{Method: "Double", Args: []any{1}})
	require.ErrorIs(t, err, status.ErrServiceNotFound)
	require.ErrorContains(t, err, `dubbo: no service demo.Shp:1.0 on port `+port+`, nor demo.Shp with any other version or group `+
		`(check the interface name against the provider's; a port does not list its other services)`)
	require.NotContains(t, err.Error(), "Vault")
	require.NotContains(t, err.Error(), "demo.Shop")

	// Many variants: the nearest five, then how many more.
	for _, g := range []string{"g1", "g2", "g3", "g4", "g5", "g6"} {
		prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", u.Port, "demo.Shop",
			map[string]string{protocol.KeyVersion: "3.0", protocol.KeyGroup: g}), shop{})
		require.NoError(t, err)
		_, err = p.Export(prov)
		require.NoError(t, err)
	}
	third := refer(t, p, u.With(protocol.KeyVersion, "3.0"))
	_, err = third.Invoke(ctx, &protocol.Invocation{Method: "Double", Args: []any{1}})
	require.ErrorContains(t, err, `dubbo: no service demo.Shop:3.0 on port `+port+`; it serves demo.Shop with `+
		`version "1.0" and no group; version "3.0" and group "g1"; version "3.0" and group "g2"; version "3.0" and group "g3"; `+
		`version "3.0" and group "g4"; and 3 more (`)
}
