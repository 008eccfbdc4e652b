package words

import "testing"

func TestArguments(t *testing.T) {
	for n, want := range map[int]string{0: "no argument", 1: "1 argument", 2: "2 arguments", 10: "10 arguments"} {
		if got := Arguments(n); got != want {
			t.Errorf("Arguments(%d) = %q, want %q", n, got, want)
		}
	}
}
