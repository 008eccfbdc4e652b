package peertext_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/peertext"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"service not found: demo.X", 100, "service not found: demo.X"},
		{"line one\n\tline two", 100, "line one\n\tline two"},
		{"\x1b[31mred\x1b[0m", 100, "\uFFFD[31mred\uFFFD[0m"},
		{"bad \xff utf-8", 100, "bad \uFFFD utf-8"},
		{"héllo wörld", 100, "héllo wörld"},
		{"abcdefgh", 4, "abcd… (4 more bytes cut)"},
		{"aé", 2, "a… (2 more bytes cut)"}, // not inside the rune
		{"\x00\x01\x02zz", 3, "\uFFFD\uFFFD\uFFFD… (2 more bytes cut)"},
		{"", 10, ""},
	} {
		require.Equal(t, c.want, peertext.String([]byte(c.in), c.max), "%q", c.in)
	}
	for _, in := range []string{"plain text", "\x1b[31mred", "abcdefgh"} {
		require.Equal(t, peertext.String([]byte(in), 4), peertext.String(in, 4), "a string as its bytes")
	}
	long := strings.Repeat("e", 1<<20)
	got := peertext.String([]byte(long), 4096)
	require.Equal(t, strings.Repeat("e", 4096)+"… (1044480 more bytes cut)", got)
}
