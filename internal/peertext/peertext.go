// Package peertext turns text a peer sent (an error message in a
// response) into a string that is safe to show and to log: bounded in
// length, valid UTF-8, without control characters other than newline
// and tab. A provider could otherwise put megabytes, or terminal escape
// sequences, into a consumer's errors and logs.
package peertext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns b as text of at most max bytes plus a note of how many
// were cut; invalid UTF-8 and control characters other than '\n' and
// '\t' become U+FFFD.
func String[T string | []byte](b T, max int) string {
	if len(b) <= max && plain(b) {
		return string(b) // a string is returned as it is
	}
	cut := len(b)
	if cut > max {
		cut = max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
	}
	head := b[:cut]
	if plain(head) {
		return string(head) + more(len(b)-cut)
	}
	var s strings.Builder
	s.Grow(len(head))
	for len(head) > 0 {
		r, n := utf8.DecodeRune([]byte(head[:min(len(head), utf8.UTFMax)]))
		head = head[n:]
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			r = utf8.RuneError
		}
		s.WriteRune(r)
	}
	if cut < len(b) {
		s.WriteString(more(len(b) - cut))
	}
	return s.String()
}

// plain reports whether b is printable ASCII, newlines and tabs.
func plain[T string | []byte](b T) bool {
	for i := range len(b) {
		if c := b[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

func more(n int) string { return "… (" + strconv.Itoa(n) + " more bytes cut)" }
