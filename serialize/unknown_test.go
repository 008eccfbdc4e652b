package serialize_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

func TestUnknownFields(t *testing.T) {
	type wide struct {
		Name  string `msgpack:"name" json:"name"`
		Extra int    `msgpack:"extra" json:"extra"`
	}
	type narrow struct {
		Name string `msgpack:"name" json:"name"`
	}
	for _, allow := range []bool{false, true} {
		tb := serialize.BuiltinLimits(serialize.Limits{AllowUnknownFields: allow})
		for _, name := range tb.Names() {
			s, err := tb.Get(name)
			require.NoError(t, err)
			data, err := s.Marshal(wide{Name: "a", Extra: 1})
			require.NoError(t, err)
			var n narrow
			err = s.Unmarshal(data, &n)
			dec, derr := s.NewDecoder(data)
			require.NoError(t, derr)
			var n2 narrow
			err2 := dec.Decode(&n2)
			dec.Release()
			if allow {
				require.NoError(t, err, name)
				require.NoError(t, err2, name)
				assert.Equal(t, "a", n.Name)
				assert.Equal(t, "a", n2.Name)
			} else {
				require.Error(t, err, name)
				assert.Contains(t, err.Error(), "extra", name)
				require.Error(t, err2, name)
				assert.Contains(t, err2.Error(), "extra", name)
			}
		}
	}
}
