package registry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/registry"
)

// TestCacheRefusesSharedDirectories: a provider list in a directory or file
// that other users may write, or that another user owns, could come from
// anyone: the cache neither reads nor writes it.
func TestCacheRefusesSharedDirectories(t *testing.T) {
	planted := `{"version":1,"services":{"demo.Greeter":["dubbo://10.6.6.6:20880/demo.Greeter"]}}`
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "demo.Greeter", nil)
	for name, prepare := range map[string]func(dir, file string){
		"world-writable directory": func(dir, _ string) { require.NoError(t, os.Chmod(dir, 0o777)) },
		"group-writable file":      func(_, file string) { require.NoError(t, os.Chmod(file, 0o664)) },
		"directory of another user": func(dir, _ string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give a directory away")
			}
			require.NoError(t, os.Chown(dir, 65534, 65534))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "minidubbo")
			require.NoError(t, os.Mkdir(dir, 0o700))
			file := filepath.Join(dir, "registry-app-zk.json")
			require.NoError(t, os.WriteFile(file, []byte(planted), 0o600))
			prepare(dir, file)
			c := registry.OpenCache(file, nil)
			_, ok := c.Load("demo.Greeter")
			require.False(t, ok, "the planted list is not read")
			err := c.Store("demo.Greeter", []*protocol.URL{u})
			if strings.Contains(name, "file") {
				// A private directory: the file is replaced by one of ours.
				require.NoError(t, err)
				b, err := os.ReadFile(file)
				require.NoError(t, err)
				require.NotContains(t, string(b), "10.6.6.6")
				return
			}
			require.ErrorContains(t, err, "refusing to write the provider cache")
		})
	}

	// Without a user cache directory the default is this user's own
	// directory under the temporary directory, not the shared one.
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	p := registry.DefaultCachePath("app", "zookeeper://127.0.0.1:2181")
	require.NotEqual(t, os.TempDir(), filepath.Dir(p))
	require.Contains(t, p, "minidubbo-")
}
