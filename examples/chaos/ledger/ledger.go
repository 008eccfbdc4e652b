// Package ledger is the chaos harness's record of calls: consumers write
// one line when they send a call and one when it ends (succeeded, with the
// provider that answered, or failed, with the kind of error); providers
// write one line per call they execute. Reading both sides tells failed,
// lost and duplicated calls apart:
//
//   - failed: the consumer got an error;
//   - lost: the consumer got a success but no provider executed the call,
//     or the consumer sent it and never saw it end;
//   - duplicated: providers executed the call more than once (a failover
//     retried an attempt that had in fact run).
//
// Lines are plain text so a human can grep them:
//
//	S <id>                                consumer sent the call
//	O <id> <provider> <unixns> <elapsedns> consumer: succeeded, answered by provider
//	F <id> <kind> <unixns> <elapsedns>     consumer: failed, error kind
//	<id>                                  provider executed the call
//
// where unixns is when the call ended and elapsedns how long it took.
package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxLine bounds one ledger line; ids, provider names and error kinds are
// short.
const maxLine = 4096

// Consumer records a consumer's calls in a file. Lines are buffered and
// written by Flush (call it periodically, and before exit).
type Consumer struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

// CreateConsumer creates (truncating) the consumer ledger at path.
func CreateConsumer(path string) (*Consumer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Consumer{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Sent records that the call id is about to be sent.
func (c *Consumer) Sent(id string) {
	c.mu.Lock()
	c.w.WriteString("S ")
	c.w.WriteString(id)
	c.w.WriteByte('\n')
	c.mu.Unlock()
}

// Succeeded records that the call id, sent at start, succeeded at end,
// answered by provider.
func (c *Consumer) Succeeded(id, provider string, start, end time.Time) {
	c.end('O', id, field(provider), start, end)
}

// Failed records that the call id, sent at start, failed at end with an
// error of kind.
func (c *Consumer) Failed(id, kind string, start, end time.Time) {
	c.end('F', id, field(kind), start, end)
}

func (c *Consumer) end(tag byte, id, what string, start, at time.Time) {
	var b [20]byte
	c.mu.Lock()
	c.w.WriteByte(tag)
	c.w.WriteByte(' ')
	c.w.WriteString(id)
	c.w.WriteByte(' ')
	c.w.WriteString(what)
	c.w.WriteByte(' ')
	c.w.Write(strconv.AppendInt(b[:0], at.UnixNano(), 10))
	c.w.WriteByte(' ')
	c.w.Write(strconv.AppendInt(b[:0], int64(at.Sub(start)), 10))
	c.w.WriteByte('\n')
	c.mu.Unlock()
}

// field makes s one non-empty space-free field.
func field(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\t' {
			return '_'
		}
		return r
	}, s)
}

// Flush writes buffered lines to the file.
func (c *Consumer) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Flush()
}

// Close flushes and closes the file.
func (c *Consumer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.w.Flush(), c.f.Close())
}

// Provider records the calls a provider executes. Each line is written to
// the file at once (one write system call), so a provider killed with
// SIGKILL loses no line of a call it executed.
type Provider struct {
	f *os.File
}

// CreateProvider creates (truncating) the provider ledger at path.
func CreateProvider(path string) (*Provider, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Provider{f: f}, nil
}

// Executed records that the call id ran.
func (p *Provider) Executed(id string) error {
	b := make([]byte, 0, len(id)+1)
	b = append(b, id...)
	b = append(b, '\n')
	_, err := p.f.Write(b)
	return err
}

// Close closes the file.
func (p *Provider) Close() error { return p.f.Close() }

// Tally is what the ledgers of one run say.
type Tally struct {
	// Calls is the number of distinct calls consumers sent; every call is
	// counted once in OK, Failed or Unanswered.
	Calls, OK, Failed, Unanswered int64
	// NotExecuted counts calls a consumer says succeeded but no provider
	// executed.
	NotExecuted int64
	// Duplicated counts calls executed more than once; Executions is
	// every execution.
	Duplicated, Executions int64
	// DuplicatedElapsed holds, for each duplicated call, how long its
	// consumer waited for it (a duplicate after a timeout waited at least
	// one attempt's timeout).
	DuplicatedElapsed []time.Duration
	// FailedButExecuted counts failed calls a provider did execute.
	FailedButExecuted int64
	// Unknown counts ids providers executed that no consumer sent (a
	// corrupt ledger).
	Unknown int64
	// FailedKinds counts failed calls by error kind.
	FailedKinds map[string]int64
	// P50, P99 and Max are the consumers' call times (succeeded and
	// failed calls, retries included).
	P50, P99, Max time.Duration
}

// Lost is the number of lost calls: succeeded but never executed, or sent
// and never answered.
func (t Tally) Lost() int64 { return t.NotExecuted + t.Unanswered }

// Check verifies the tally's arithmetic.
func (t Tally) Check() error {
	if t.Calls != t.OK+t.Failed+t.Unanswered {
		return fmt.Errorf("ledger: calls %d != ok %d + failed %d + unanswered %d", t.Calls, t.OK, t.Failed, t.Unanswered)
	}
	if t.Unknown != 0 {
		return fmt.Errorf("ledger: providers executed %d calls no consumer sent", t.Unknown)
	}
	var kinds int64
	for _, n := range t.FailedKinds {
		kinds += n
	}
	if kinds != t.Failed {
		return fmt.Errorf("ledger: failed %d != sum of failed kinds %d", t.Failed, kinds)
	}
	return nil
}

// Kinds formats FailedKinds as "kind n, kind n" in a stable order.
func (t Tally) Kinds() string {
	ks := make([]string, 0, len(t.FailedKinds))
	for k := range t.FailedKinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for i, k := range ks {
		ks[i] = fmt.Sprintf("%s %d", k, t.FailedKinds[k])
	}
	return strings.Join(ks, ", ")
}

// outcome of one call on the consumer side.
const (
	sent byte = iota + 1
	ok
	failed
)

// Analyze reads every consumer and provider ledger and tallies the calls.
// A call ended twice, or a line that does not parse, is an error: the
// harness's arithmetic must be exact.
func Analyze(consumerFiles, providerFiles []string) (Tally, error) {
	t := Tally{FailedKinds: map[string]int64{}}
	state := map[string]byte{}
	elapsed := map[string]time.Duration{}
	var times []time.Duration
	for _, path := range consumerFiles {
		err := eachLine(path, func(line []byte) error {
			tag, rest, _ := bytes.Cut(line, []byte{' '})
			fields := strings.Fields(string(rest))
			switch {
			case string(tag) == "S" && len(fields) == 1:
				if _, dup := state[fields[0]]; dup {
					return fmt.Errorf("call %s sent twice", fields[0])
				}
				state[fields[0]] = sent
			case (string(tag) == "O" || string(tag) == "F") && len(fields) == 4:
				id := fields[0]
				if state[id] != sent {
					return fmt.Errorf("call %s ended but not sent, or ended twice", id)
				}
				if _, err := strconv.ParseInt(fields[2], 10, 64); err != nil {
					return fmt.Errorf("bad time %q", fields[2])
				}
				el, err := strconv.ParseInt(fields[3], 10, 64)
				if err != nil || el < 0 {
					return fmt.Errorf("bad elapsed time %q", fields[3])
				}
				elapsed[id] = time.Duration(el)
				times = append(times, time.Duration(el))
				if tag[0] == 'O' {
					state[id] = ok
				} else {
					state[id] = failed
					t.FailedKinds[fields[1]]++
				}
			default:
				return fmt.Errorf("bad line %q", line)
			}
			return nil
		})
		if err != nil {
			return t, err
		}
	}
	executed := map[string]int32{}
	for _, path := range providerFiles {
		err := eachLine(path, func(line []byte) error {
			if len(line) == 0 || bytes.ContainsAny(line, " \t") {
				return fmt.Errorf("bad line %q", line)
			}
			executed[string(line)]++
			return nil
		})
		if err != nil {
			return t, err
		}
	}
	t.Calls = int64(len(state))
	if len(times) > 0 {
		slices.Sort(times)
		t.P50 = times[(len(times)-1)*50/100]
		t.P99 = times[(len(times)-1)*99/100]
		t.Max = times[len(times)-1]
	}
	for id, s := range state {
		n := executed[id]
		switch s {
		case sent:
			t.Unanswered++
		case ok:
			t.OK++
			if n == 0 {
				t.NotExecuted++
			}
		case failed:
			t.Failed++
			if n > 0 {
				t.FailedButExecuted++
			}
		}
	}
	for id, n := range executed {
		t.Executions += int64(n)
		if n > 1 {
			t.Duplicated++
			if _, ended := elapsed[id]; ended {
				t.DuplicatedElapsed = append(t.DuplicatedElapsed, elapsed[id])
			}
		}
		if _, known := state[id]; !known {
			t.Unknown++
		}
	}
	return t, nil
}

func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("ledger: %s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("ledger: %s: %w", path, err)
	}
	return nil
}

// Tail follows consumer ledgers while they are written and remembers, per
// consumer and provider, the last time the consumer was served by the
// provider, so a harness can wait until every consumer uses a provider
// again.
type Tail struct {
	mu    sync.Mutex
	files map[string]*tailFile // by path
	last  map[string]map[string]time.Time
}

type tailFile struct {
	consumer string
	off      int64
}

// NewTail returns an empty Tail.
func NewTail() *Tail {
	return &Tail{files: map[string]*tailFile{}, last: map[string]map[string]time.Time{}}
}

// Add follows the ledger at path, written by consumer (several files may
// belong to one consumer, one per run of its process).
func (t *Tail) Add(consumer, path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.files[path]; !ok {
		t.files[path] = &tailFile{consumer: consumer}
	}
}

// Poll reads what was appended to the followed files since the last Poll.
func (t *Tail) Poll() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for path, tf := range t.files {
		if err := t.poll(path, tf); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tail) poll(path string, tf *tailFile) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(tf.off, io.SeekStart); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil { // an incomplete last line is read again next time
			if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
				return nil
			}
			return fmt.Errorf("ledger: %w", err)
		}
		tf.off += int64(len(line))
		if len(line) < 2 || line[0] != 'O' {
			continue
		}
		fs := strings.Fields(string(line[2:]))
		if len(fs) != 4 {
			continue
		}
		ns, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			continue
		}
		m := t.last[tf.consumer]
		if m == nil {
			m = map[string]time.Time{}
			t.last[tf.consumer] = m
		}
		if at := time.Unix(0, ns); at.After(m[fs[1]]) {
			m[fs[1]] = at
		}
	}
}

// ServedSince reports whether every consumer was served by every provider
// at or after since, as of the last Poll.
func (t *Tail) ServedSince(consumers, providers []string, since time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range consumers {
		for _, p := range providers {
			if t.last[c][p].Before(since) {
				return false
			}
		}
	}
	return true
}

// Recovery returns how long after since every consumer was first served
// again by every one of providers, from the consumers' ledgers (files by
// consumer name); ok is false when some consumer never was.
func Recovery(files map[string][]string, providers []string, since time.Time) (d time.Duration, ok bool, err error) {
	var latest time.Time
	for _, paths := range files {
		first := map[string]time.Time{}
		for _, path := range paths {
			err := eachLine(path, func(line []byte) error {
				if len(line) < 2 || line[0] != 'O' {
					return nil
				}
				fs := strings.Fields(string(line[2:]))
				if len(fs) != 4 {
					return fmt.Errorf("bad line %q", line)
				}
				ns, err := strconv.ParseInt(fs[2], 10, 64)
				if err != nil {
					return fmt.Errorf("bad time %q", fs[2])
				}
				at := time.Unix(0, ns)
				if at.Before(since) {
					return nil
				}
				if f, seen := first[fs[1]]; !seen || at.Before(f) {
					first[fs[1]] = at
				}
				return nil
			})
			if err != nil {
				return 0, false, err
			}
		}
		for _, p := range providers {
			f, seen := first[p]
			if !seen {
				return 0, false, nil
			}
			if f.After(latest) {
				latest = f
			}
		}
	}
	if latest.IsZero() {
		return 0, false, nil
	}
	return latest.Sub(since), true, nil
}
