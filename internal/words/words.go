// Package words holds the small pieces of wording that error messages of
// several packages share, so that they read the same everywhere.
package words

import "strconv"

// Arguments reads "no argument", "1 argument", "2 arguments".
func Arguments(n int) string {
	switch n {
	case 0:
		return "no argument"
	case 1:
		return "1 argument"
	}
	return strconv.Itoa(n) + " arguments"
}
