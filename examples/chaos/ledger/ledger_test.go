package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every outcome is told apart: a plain success, a failure, a failure that
// ran anyway, a duplicate, a success no provider ran, and a call never
// answered.
func TestAnalyze(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(100, 0)
	c, err := CreateConsumer(filepath.Join(dir, "c1"))
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		c.Sent(id)
	}
	c.Succeeded("a", "p1", at, at)
	c.Failed("b", "timeout", at, at)
	c.Failed("c", "no provider", at, at) // a space in the kind becomes "_"
	c.Succeeded("d", "p2", at.Add(-1500*time.Millisecond), at)
	c.Succeeded("e", "p1", at, at)
	c.Succeeded("g", "p3", at, at)
	// f: never answered.
	require.NoError(t, c.Close())

	p1, err := CreateProvider(filepath.Join(dir, "p1"))
	require.NoError(t, err)
	p2, err := CreateProvider(filepath.Join(dir, "p2"))
	require.NoError(t, err)
	for _, id := range []string{"a", "c", "d"} {
		require.NoError(t, p1.Executed(id))
	}
	for _, id := range []string{"d", "g", "f"} { // d ran twice; e ran nowhere
		require.NoError(t, p2.Executed(id))
	}
	require.NoError(t, p1.Close())
	require.NoError(t, p2.Close())

	tl, err := Analyze([]string{filepath.Join(dir, "c1")}, []string{filepath.Join(dir, "p1"), filepath.Join(dir, "p2")})
	require.NoError(t, err)
	require.NoError(t, tl.Check())
	assert.Equal(t, int64(7), tl.Calls)
	assert.Equal(t, int64(4), tl.OK)
	assert.Equal(t, int64(2), tl.Failed)
	assert.Equal(t, int64(1), tl.Unanswered)
	assert.Equal(t, int64(1), tl.NotExecuted)
	assert.Equal(t, int64(2), tl.Lost(), "e succeeded unexecuted, f never answered")
	assert.Equal(t, int64(1), tl.Duplicated)
	assert.Equal(t, []time.Duration{1500 * time.Millisecond}, tl.DuplicatedElapsed)
	assert.Equal(t, int64(6), tl.Executions)
	assert.Equal(t, int64(1), tl.FailedButExecuted)
	assert.Equal(t, "no_provider 1, timeout 1", tl.Kinds())
	assert.Equal(t, time.Duration(0), tl.P50)
	assert.Equal(t, time.Duration(0), tl.P99, "5 of 6 ended calls took 0")
	assert.Equal(t, 1500*time.Millisecond, tl.Max)
}

func TestAnalyzeRejectsBadLedgers(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"ended twice":    "S a\nO a p1 1 1\nF a timeout 2 1\n",
		"ended unsent":   "O a p1 1 1\n",
		"sent twice":     "S a\nS a\n",
		"bad time":       "S a\nO a p1 soon 1\n",
		"bad elapsed":    "S a\nO a p1 1 -5\n",
		"garbage":        "hello world\n",
		"missing fields": "S a\nO a p1 1\n",
	}
	for name, text := range cases {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		_, err := Analyze([]string{path}, nil)
		assert.Error(t, err, name)
	}
	// A provider executing a call nobody sent fails Check.
	cpath, ppath := filepath.Join(dir, "c"), filepath.Join(dir, "p")
	require.NoError(t, os.WriteFile(cpath, []byte("S a\nO a p1 1 1\n"), 0o644))
	require.NoError(t, os.WriteFile(ppath, []byte("a\nzz\n"), 0o644))
	tl, err := Analyze([]string{cpath}, []string{ppath})
	require.NoError(t, err)
	assert.Equal(t, int64(1), tl.Unknown)
	assert.Error(t, tl.Check())
}

func TestRecoveryAndTail(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1000, 0)
	write := func(name string, lines ...string) string {
		path := filepath.Join(dir, name)
		c, err := CreateConsumer(path)
		require.NoError(t, err)
		for i, l := range lines {
			id := name + string(rune('a'+i))
			c.Sent(id)
			end := t0.Add(time.Duration(l[2]-'0') * time.Second)
			c.Succeeded(id, l[:2], end, end)
		}
		require.NoError(t, c.Close())
		return path
	}
	c1 := write("c1", "p10", "p12", "p23", "p14")
	c2 := write("c2", "p11", "p25", "p26")
	files := map[string][]string{"c1": {c1}, "c2": {c2}}
	d, ok, err := Recovery(files, []string{"p1"}, t0.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, time.Second, d, "c1 first served by p1 at 2 s, c2 at 1 s")
	d, ok, err = Recovery(files, []string{"p1", "p2"}, t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.False(t, ok, "c2 is not served by p1 after 2 s")
	assert.Zero(t, d)
	d, ok, err = Recovery(files, []string{"p2"}, t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d)

	tail := NewTail()
	tail.Add("c1", c1)
	tail.Add("c2", c2)
	tail.Add("c3", filepath.Join(dir, "not yet"))
	require.NoError(t, tail.Poll())
	assert.True(t, tail.ServedSince([]string{"c1", "c2"}, []string{"p1", "p2"}, t0.Add(time.Second)))
	assert.False(t, tail.ServedSince([]string{"c1", "c2"}, []string{"p1"}, t0.Add(2*time.Second)))
	assert.False(t, tail.ServedSince([]string{"c3"}, []string{"p1"}, t0))
	// Lines appended later are read by the next Poll, and an incomplete
	// last line waits for its end.
	f, err := os.OpenFile(c2, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("S c2z\nO c2z p1 9000000000")
	require.NoError(t, err)
	require.NoError(t, tail.Poll())
	assert.False(t, tail.ServedSince([]string{"c2"}, []string{"p1"}, t0.Add(2*time.Second)))
	_, err = f.WriteString("000 5\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, tail.Poll())
	assert.True(t, tail.ServedSince([]string{"c2"}, []string{"p1"}, t0.Add(2*time.Second)))
}
