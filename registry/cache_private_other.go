//go:build !unix

package registry

// checkPrivate returns an error if path (a directory or a file) is a
// symbolic link. Where file modes carry no owner nor group and other
// permissions (Windows: access is governed by ACLs), that is all it can
// check; the user's profile directory, where DefaultCachePath puts the
// cache, is private by default there.
func checkPrivate(path string) error {
	_, err := lstatNoLink(path)
	return err
}
