//go:build unix

package registry

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate returns an error if path (a directory or a file) is a
// symbolic link, is owned by another user, or may be written by the group
// or others: a provider list read from there could come from anyone.
func checkPrivate(path string) error {
	fi, err := lstatNoLink(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s may be written by other users (mode %v)", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user (%d)", path, st.Uid, os.Getuid())
	}
	return nil
}
