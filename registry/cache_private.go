package registry

import (
	"fmt"
	"os"
)

// lstatNoLink returns path's own file info (a symbolic link is not
// followed), or an error if path is a symbolic link: checkPrivate's
// first check on every platform.
func lstatNoLink(path string) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symbolic link", path)
	}
	return fi, nil
}
