package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
)

type Item struct {
	SKU string
	Qty int
}

type inventory struct{}

func (inventory) Get(_ context.Context, sku string) (*Item, error)                 { return &Item{SKU: sku}, nil }
func (inventory) Put(_ context.Context, it Item, ttl time.Duration) (int64, error) { return 1, nil }
func (inventory) Tags(_ context.Context, m map[string]int, raw []byte) ([]string, error) {
	return nil, nil
}
func (inventory) Ping(context.Context) error { return nil }

func inventoryURL(t *testing.T) *protocol.URL {
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "shop.Inventory", nil)
	p, err := proxy.NewProvider(u, inventory{})
	require.NoError(t, err)
	return u.With(proxy.KeySignatures, p.Signatures())
}

func TestSignatures(t *testing.T) {
	u := inventoryURL(t)
	assert.Equal(t, "Get(string)*Item;Ping();Put(Item,int64)int64;Tags(map[string]int,[]byte)[]string", u.Param(proxy.KeySignatures, ""))
	sigs, err := proxy.ParseSignatures(u.Param(proxy.KeySignatures, ""))
	require.NoError(t, err)
	assert.Equal(t, proxy.Signature{Name: "Tags", Args: []string{"map[string]int", "[]byte"}, Reply: "[]string"}, sigs["Tags"])
	assert.Equal(t, "Tags(map[string]int, []byte) ([]string, error)", sigs["Tags"].Shape())
	assert.Equal(t, "Ping() error", sigs["Ping"].Shape())
	_, err = proxy.ParseSignatures("Get(string")
	assert.ErrorContains(t, err, `malformed signature "Get(string"`)
}

func TestCheckStub(t *testing.T) {
	u := inventoryURL(t)
	// A stub in another package: its own Item type, a subset of methods,
	// other number types: fits.
	type myItem struct{ SKU string }
	var good struct {
		service.Echo // answered by the protocol for every service
		Get          func(context.Context, string) (myItem, error)
		Put          func(context.Context, map[string]any, int) (int, error)
		Ping         func(context.Context) error
	}
	require.NoError(t, proxy.CheckStub(&good, u))

	var bad struct {
		Get   func(context.Context, int) (*Item, error)
		Put   func(context.Context, Item) (int64, error)
		Pingg func(context.Context) error
		Ping  func(context.Context) (string, error)
		Tags  func(context.Context, map[string]int, []byte) (string, error)
	}
	err := proxy.CheckStub(&bad, u)
	require.ErrorIs(t, err, proxy.ErrContract)
	assert.EqualError(t, err, "contract mismatch: shop.Inventory stub vs provider 127.0.0.1:20880: "+
		"stub Get argument 1 is int, the provider expects string: Get(string) (*Item, error); "+
		"stub Put passes 1 argument, the provider takes 2: Put(Item, int64) (int64, error); "+
		`the provider has no method Pingg; did you mean "Ping"? (it has: Get, Ping, Put, Tags); `+
		"stub Ping expects a string reply, the provider's returns only an error: Ping() error; "+
		"stub Tags expects a string reply, the provider returns []string: Tags(map[string]int, []byte) ([]string, error)")

	// A provider that publishes no signatures is not checked.
	require.NoError(t, proxy.CheckStub(&bad, protocol.NewURL("dubbo", "127.0.0.1", 1, "shop.Inventory", nil)))
}
