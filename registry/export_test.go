package registry

// SkipCacheSync makes cache writes leave out their fsync until the
// returned function is called (for FuzzOpenCache).
func SkipCacheSync() (restore func()) {
	skipSync.Store(true)
	return func() { skipSync.Store(false) }
}
