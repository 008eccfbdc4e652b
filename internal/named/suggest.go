package named

import (
	"strings"
)

// Closest returns the known name nearest to name, for "did you mean"
// hints: the one with the smallest edit distance (ignoring case), when
// that distance is small for the name's length (at most 1 for names up to
// 4 characters, 2 up to 8, 3 beyond), or a known name that starts with or
// is contained in name. It returns "" when nothing is close.
func Closest(name string, known []string) string {
	if name == "" {
		return ""
	}
	lname := strings.ToLower(name)
	best, bestD := "", -1
	for _, k := range known {
		lk := strings.ToLower(k)
		if lk == lname {
			return k
		}
		d := distance(lname, lk)
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := 1
	switch n := len(name); {
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	}
	if bestD >= 0 && bestD <= limit {
		return best
	}
	for _, k := range known {
		lk := strings.ToLower(k)
		if len(lk) >= 3 && len(lname) >= 3 && (strings.HasPrefix(lk, lname) || strings.HasPrefix(lname, lk)) {
			return k
		}
	}
	return ""
}

// DidYouMean returns `; did you mean "x"?` for the known name closest to
// name, or "" when none is close; it reads after "unknown ...".
func DidYouMean(name string, known []string) string {
	if c := Closest(name, known); c != "" {
		return `; did you mean "` + c + `"?`
	}
	return ""
}

// distance is the Levenshtein distance between a and b (bytes), counting
// a swap of two neighbours as one edit.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
