package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
)

// cacheVersion is the format version written into cache files.
const cacheVersion = 1

// cacheFile is the on-disk form of a Cache.
type cacheFile struct {
	Version  int                 `json:"version"`
	Services map[string][]string `json:"services"`
}

// Cache keeps the last provider list of every subscribed service in memory
// and in a file, so a consumer that starts while the registry is
// unreachable can still find its providers. Each Store rewrites the file
// atomically (a temporary file in the same directory, fsync, rename), so a
// crash never leaves a torn file. A file that cannot be read or parsed is
// ignored with a warning. The file is created with mode 0600: provider URLs
// may carry tokens.
//
// Processes of one application on one host share the file: each rewrite
// keeps the entries of services the writer does not know and replaces the
// ones it does (the last writer wins for a shared service).
//
// A Cache is safe for concurrent use. The zero path keeps it in memory only.
type Cache struct {
	path string
	log  *zap.Logger

	mu    sync.Mutex
	lists map[string][]string
	wmu   sync.Mutex // serializes file writes
}

// DefaultCachePath returns the default cache file for an application and a
// registry address: os.UserCacheDir()/minidubbo/registry-{app}-{address}.json,
// with every character outside [A-Za-z0-9._-] in app and address replaced
// by '_'. When there is no user cache directory it uses a directory of
// this user's own under os.TempDir() (minidubbo-{uid}), never the shared
// directory itself; the cache refuses a directory or file that another
// user owns or may write (see OpenCache).
func DefaultCachePath(application, registryAddress string) string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		return filepath.Join(os.TempDir(), fmt.Sprintf("minidubbo-%d", os.Getuid()),
			"registry-"+sanitize(orApp(application))+"-"+sanitize(registryAddress)+".json")
	}
	application = orApp(application)
	name := "registry-" + sanitize(application) + "-" + sanitize(registryAddress) + ".json"
	return filepath.Join(dir, "minidubbo", name)
}

func orApp(application string) string {
	if application == "" {
		return "app"
	}
	return application
}

func sanitize(s string) string {
	s = strings.TrimPrefix(s, "zookeeper://")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() > 120 {
		return b.String()[:120]
	}
	return b.String()
}

// OpenCache returns a cache backed by the file at path ("" for memory
// only) and loads what the file holds. A missing file is an empty cache; a
// corrupt or unreadable one is ignored with a warning on log (nil means no
// logging) and replaced at the next Store.
func OpenCache(path string, log *zap.Logger) *Cache {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cache{path: path, log: log, lists: map[string][]string{}}
	if path == "" {
		return c
	}
	if err := checkPrivate(filepath.Dir(path)); err == nil {
		err = checkPrivate(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("provider cache not trusted, ignored", zap.String("file", path), zap.Error(err))
			return c
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Warn("provider cache directory not trusted, ignored", zap.String("file", path), zap.Error(err))
		return c
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("provider cache unreadable, ignored", zap.String("file", path), zap.Error(err))
		}
		return c
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		log.Warn("provider cache corrupt, ignored", zap.String("file", path), zap.Error(err))
		return c
	}
	if f.Version != cacheVersion {
		log.Warn("provider cache has an unknown version, ignored", zap.String("file", path), zap.Int("version", f.Version))
		return c
	}
	for key, urls := range f.Services {
		c.lists[key] = slices.Clone(urls)
	}
	return c
}

// Path returns the cache file ("" for a memory-only cache).
func (c *Cache) Path() string { return c.path }

// Load returns the cached providers of key (a service key) and whether the
// cache holds an entry for it. URLs that no longer parse are skipped with
// a warning.
func (c *Cache) Load(key string) ([]*protocol.URL, bool) {
	c.mu.Lock()
	raw, ok := c.lists[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	urls := make([]*protocol.URL, 0, len(raw))
	for _, s := range raw {
		u, err := protocol.ParseURL(s)
		if err != nil {
			c.log.Warn("provider cache entry ignored", zap.String("service", key), zap.Error(err))
			continue
		}
		urls = append(urls, u)
	}
	return urls, true
}

// Store records providers as the list of key and rewrites the file when
// the list changed. The memory copy is updated even when the write fails;
// the error says why the file was not written.
func (c *Cache) Store(key string, providers []*protocol.URL) error {
	raw := make([]string, len(providers))
	for i, p := range providers {
		raw[i] = p.String()
	}
	slices.Sort(raw)
	c.mu.Lock()
	if old, ok := c.lists[key]; ok && slices.Equal(old, raw) {
		c.mu.Unlock()
		return nil
	}
	c.lists[key] = raw
	c.mu.Unlock()
	if c.path == "" {
		return nil
	}
	return c.write()
}

// write writes a snapshot of every list to the file atomically. Entries
// the file holds for services this cache does not know (written by another
// process of the same application) are kept.
func (c *Cache) write() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	f := cacheFile{Version: cacheVersion, Services: map[string][]string{}}
	if b, err := os.ReadFile(c.path); err == nil && checkPrivate(c.path) == nil && checkPrivate(filepath.Dir(c.path)) == nil {
		var old cacheFile
		if json.Unmarshal(b, &old) == nil && old.Version == cacheVersion {
			for k, v := range old.Services {
				f.Services[k] = v
			}
		}
	}
	c.mu.Lock()
	for k, v := range c.lists {
		f.Services[k] = v
	}
	b, err := json.MarshalIndent(f, "", "  ")
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("registry: cache: %w", err)
	}
	if err := writeAtomic(c.path, b); err != nil {
		c.log.Warn("provider cache not written", zap.String("file", c.path), zap.Error(err))
		return fmt.Errorf("registry: cache: %w", err)
	}
	return nil
}

// skipSync leaves out writeAtomic's fsync. Only FuzzOpenCache sets it
// (export_test.go): it checks what the file holds, not the disk, and an
// fsync per input made its 30,000 runs take over 4 of make fuzz's 5
// minutes on a loaded machine.
var skipSync atomic.Bool

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := checkPrivate(dir); err != nil {
		return fmt.Errorf("refusing to write the provider cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil && !skipSync.Load() {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o600)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}
