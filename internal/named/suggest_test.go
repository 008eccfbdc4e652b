package named

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClosest(t *testing.T) {
	lbs := []string{"consistenthash", "leastactive", "p2c", "random", "roundrobin", "shortestresponse"}
	for name, want := range map[string]string{
		"roundrobn":     "roundrobin",
		"RoundRobin":    "roundrobin",
		"round_robin":   "roundrobin",
		"randon":        "random",
		"p2":            "p2c",
		"leastActive":   "leastactive",
		"consistent":    "consistenthash",
		"shortest":      "shortestresponse",
		"rr":            "",
		"weighted":      "",
		"":              "",
		"zzzzzzzzzzzzz": "",
	} {
		assert.Equal(t, want, Closest(name, lbs), name)
	}
	assert.Equal(t, "session_timeout", Closest("sesion_timeout", []string{"address", "timeout", "session_timeout"}))
	assert.Equal(t, "failover", Closest("failvoer", []string{"failover", "failfast"}), "a swap is one edit")
	assert.Equal(t, `; did you mean "random"?`, DidYouMean("randm", lbs))
	assert.Equal(t, "", DidYouMean("xyz", lbs))
}

func TestGetSuggests(t *testing.T) {
	tb := New("loadbalance", "", map[string]int{"random": 1, "roundrobin": 2})
	_, err := tb.Get("roundrobn")
	assert.EqualError(t, err, `loadbalance: unknown "roundrobn"; did you mean "roundrobin"? (known: random, roundrobin)`)
	_, err = tb.Get("xyz")
	assert.EqualError(t, err, `loadbalance: unknown "xyz" (known: random, roundrobin)`)
}
