package proxy

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/service"
)

// frameworkKeys must be what protocol.IsFrameworkKey reports, since
// userAttachments looks them up instead of asking it about every key.
func TestFrameworkKeysAreIsFrameworkKey(t *testing.T) {
	for _, k := range []string{protocol.KeyInterface, protocol.KeyVersion, protocol.KeyGroup, protocol.KeyMethods,
		protocol.KeyWeight, protocol.KeyTimeout, protocol.KeyTimestamp, protocol.KeyWarmup, protocol.KeySerialization,
		protocol.KeyToken, protocol.KeyApplication, protocol.KeySide, protocol.KeyCategory, protocol.KeyTag,
		protocol.KeyLoadBalance, protocol.KeyCluster, protocol.KeyRetries, protocol.KeyExecutes,
		protocol.KeyRemoteApplication, protocol.KeyTimeoutSource, "", "x", "Token"} {
		assert.Equal(t, protocol.IsFrameworkKey(k), slices.Contains(frameworkKeys[:], k), k)
	}
}

func TestUserAttachments(t *testing.T) {
	app, tok := protocol.KeyRemoteApplication, protocol.KeyToken
	user := map[string]string{"a": "1", "b": "2"}
	for _, tc := range []struct {
		in   map[string]string
		want service.Attachments
		same bool // the map itself
	}{
		{nil, nil, false},
		{map[string]string{}, nil, false},
		{map[string]string{app: "shop"}, nil, false},
		{map[string]string{app: "shop", tok: "t"}, nil, false},
		{user, service.Attachments(user), true},
		{map[string]string{app: "shop", "a": "1"}, service.Attachments{"a": "1"}, false},
		{map[string]string{tok: "t", "a": "1", app: "x", "b": ""}, service.Attachments{"a": "1", "b": ""}, false},
	} {
		got := userAttachments(tc.in)
		assert.Equal(t, tc.want, got, "%v", tc.in)
		if tc.same {
			assert.Equal(t, reflect.ValueOf(tc.in).Pointer(), reflect.ValueOf(got).Pointer())
		}
	}
}
