// Package store keeps the monitor's call-count reports in SQLite (the pure
// Go modernc.org/sqlite driver): one row per minute and per key (side,
// application, service, method, provider, consumer) with the counts added up
// and the latency histograms merged, indexed by time and by service and
// method. Queries are SQL; two SQL functions registered by this package,
// minidubbo_hist_add and the aggregate minidubbo_hist_merge, add up the
// stored histograms.
//
// It is the storage of `minidubbo monitor` and of `minidubbo report -data`,
// kept apart from package monitor so that applications, which only count
// and report, do not link SQLite.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/protocol"
)

// FileName is the database's file name inside the data directory.
const FileName = "monitor.db"

// DefaultRetention is how long rows are kept when Options.Retention is 0.
const DefaultRetention = 7 * 24 * time.Hour

// Bounds on one report: a report beyond them is refused whole, with an
// error saying which bound it broke.
const (
	MaxRows     = 10000   // rows in one report
	MaxFieldLen = 1024    // bytes of each name (application, host, service, ...)
	MaxCount    = 1 << 40 // each count of calls (and of a histogram bucket) in one report
	MaxAmount   = 1 << 56 // each byte count and nanosecond sum in one report
)

// Options tune a Store. As in every layer's options: every zero field
// means the default (DefaultOptions shows them); a negative field is
// invalid (Validate).
type Options struct {
	// Retention is how long rows and report records are kept
	// (default DefaultRetention).
	Retention time.Duration
	// ReadOnly opens an existing database for queries only: nothing is
	// created, pruned or written, and a missing database is an error.
	ReadOnly bool
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// DefaultOptions returns the defaults of every field (Now nil: time.Now).
func DefaultOptions() Options { return Options{Retention: DefaultRetention} }

// Validate returns an error naming the first negative field.
func (o Options) Validate() error {
	return optcheck.NonNegative("store",
		optcheck.Field{Name: "Retention", Value: int64(o.Retention), Default: DefaultRetention})
}

// Store is the monitor's database. It is safe for concurrent use; writes
// are serialized, reads run beside them.
type Store struct {
	db        *sql.DB
	opts      Options
	mu        sync.Mutex // serializes Add and Prune
	lastPrune time.Time
}

// Kinds lists the failure kinds a row may carry, in the order of the
// columns that hold them.
var Kinds = []string{
	monitor.KindBusiness, monitor.KindTimeout, monitor.KindNoProvider,
	monitor.KindConnection, monitor.KindBusy, monitor.KindOther,
}

// kindColumns are the columns of Kinds, in the same order.
var kindColumns = []string{"f_business", "f_timeout", "f_no_provider", "f_connection", "f_busy", "f_other"}

const schema = `
CREATE TABLE IF NOT EXISTS reports (
	application TEXT NOT NULL,
	host        TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	start_ns    INTEGER NOT NULL,
	end_ns      INTEGER NOT NULL,
	received_ns INTEGER NOT NULL,
	dropped     INTEGER NOT NULL,
	rows        INTEGER NOT NULL,
	PRIMARY KEY (application, host, seq, start_ns)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS reports_by_end ON reports (end_ns);
CREATE TABLE IF NOT EXISTS calls (
	minute         INTEGER NOT NULL, -- Unix seconds, a multiple of 60
	side           TEXT NOT NULL,
	application    TEXT NOT NULL,
	service        TEXT NOT NULL,   -- group/interface:version
	method         TEXT NOT NULL,
	provider       TEXT NOT NULL,
	consumer       TEXT NOT NULL,
	first_ns       INTEGER NOT NULL, -- start of the earliest report added
	last_ns        INTEGER NOT NULL, -- end of the latest one
	calls          INTEGER NOT NULL,
	successes      INTEGER NOT NULL,
	failures       INTEGER NOT NULL,
	f_business     INTEGER NOT NULL,
	f_timeout      INTEGER NOT NULL,
	f_no_provider  INTEGER NOT NULL,
	f_connection   INTEGER NOT NULL,
	f_busy         INTEGER NOT NULL,
	f_other        INTEGER NOT NULL,
	bytes_in       INTEGER NOT NULL,
	bytes_out      INTEGER NOT NULL,
	elapsed_ns     INTEGER NOT NULL,
	max_ns         INTEGER NOT NULL,
	max_concurrent INTEGER NOT NULL,
	latency        BLOB NOT NULL,
	PRIMARY KEY (minute, side, application, service, method, provider, consumer)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_by_service ON calls (service, method, minute);
PRAGMA user_version = 1;
`

// Open opens (creating it unless o.ReadOnly) the database in dir and
// removes the rows older than the retention.
func Open(dir string, o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Retention == 0 {
		o.Retention = DefaultOptions().Retention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if strings.ContainsAny(dir, "?#") {
		return nil, fmt.Errorf("store: data directory %q: '?' and '#' are not allowed in its path", dir)
	}
	path := filepath.Join(dir, FileName)
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)"
	if o.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store: no monitor data in %s: %w", dir, err)
		}
		dsn += "&mode=ro"
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		dsn += "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	s := &Store{db: db, opts: o}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.ReadOnly {
		var version int
		err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
		if err == nil && version != 1 {
			err = fmt.Errorf("schema version %d, want 1", version)
		}
	} else {
		_, err = db.ExecContext(ctx, schema)
		if err == nil {
			_, err = s.Prune(ctx)
		}
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Outcome tells what Add did with a report.
type Outcome int

// The outcomes of Add.
const (
	// Stored: the report's rows were added.
	Stored Outcome = iota
	// Duplicate: a report with the same Application, Host, Seq and Start
	// was stored before; nothing was added.
	Duplicate
	// Expired: the report ended before the retention; nothing was added.
	Expired
)

func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Expired:
		return "expired"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ErrInvalid is matched (errors.Is) by every error of Validate, and so by
// Add's for a report Validate refuses: that report will never be stored,
// however often it is sent again (the monitor server answers it with
// monitor.Refused).
var ErrInvalid = errors.New("store: invalid report")

// invalidError is an error of Validate: its text, matching ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Validate checks a report before it is stored: names within
// MaxFieldLen and valid UTF-8 (they become Prometheus labels, which must
// be), at most MaxRows rows, known sides and failure kinds, no
// negative count, well-formed histograms, an interval that ends after it
// starts. Its errors match ErrInvalid.
func Validate(r *monitor.Report) error {
	_, err := validate(r)
	return err
}

func validate(r *monitor.Report) ([]Hist, error) {
	if r == nil {
		return nil, &invalidError{errors.New("store: nil report")}
	}
	bad := func(format string, args ...any) error {
		return &invalidError{fmt.Errorf("store: report from %.64q@%.64q seq %d: "+format, append([]any{r.Application, r.Host, r.Seq}, args...)...)}
	}
	switch {
	case r.Application == "":
		return nil, bad("no application name")
	case r.Seq == 0:
		return nil, bad("seq 0 (reports are numbered from 1)")
	case r.Start.IsZero() || r.End.IsZero() || r.End.Before(r.Start):
		return nil, bad("interval %v to %v does not end after it starts", r.Start, r.End)
	case r.Dropped < 0:
		return nil, bad("negative dropped count %d", r.Dropped)
	case len(r.Rows) > MaxRows:
		return nil, bad("%d rows, more than %d", len(r.Rows), MaxRows)
	}
	for name, v := range map[string]string{"application": r.Application, "host": r.Host} {
		if len(v) > MaxFieldLen {
			return nil, bad("%s is %d bytes, more than %d", name, len(v), MaxFieldLen)
		}
		if !utf8.ValidString(v) {
			return nil, bad("%s is not valid UTF-8", name)
		}
	}
	hists := make([]Hist, len(r.Rows))
	for i := range r.Rows {
		w := &r.Rows[i]
		if w.Side != monitor.Consumer && w.Side != monitor.Provider {
			return nil, bad("row %d: unknown side %q (known: consumer, provider)", i, w.Side)
		}
		for _, f := range []struct{ name, v string }{
			{"application", w.Application}, {"service", w.Service}, {"version", w.Version},
			{"group", w.Group}, {"method", w.Method}, {"provider", w.Provider}, {"consumer", w.Consumer},
		} {
			if len(f.v) > MaxFieldLen {
				return nil, bad("row %d: %s is %d bytes, more than %d", i, f.name, len(f.v), MaxFieldLen)
			}
			if !utf8.ValidString(f.v) {
				return nil, bad("row %d: %s is not valid UTF-8", i, f.name)
			}
		}
		if w.Service == "" || w.Method == "" {
			return nil, bad("row %d: service and method are required", i)
		}
		for _, f := range []struct {
			name   string
			v, max int64
		}{
			{"calls", w.Calls, MaxCount}, {"successes", w.Successes, MaxCount}, {"failures", w.Failures, MaxCount},
			{"bytes_in", w.BytesIn, MaxAmount}, {"bytes_out", w.BytesOut, MaxAmount},
			{"elapsed_ns", w.ElapsedNanos, MaxAmount}, {"max_ns", w.MaxNanos, MaxAmount},
			{"concurrent", w.Concurrent, MaxCount}, {"max_concurrent", w.MaxConcurrent, MaxCount},
		} {
			if f.v < 0 || f.v > f.max {
				return nil, bad("row %d: %s %d is out of range (0 to %d)", i, f.name, f.v, f.max)
			}
		}
		for k, n := range w.FailuresByKind {
			if kindIndex(k) < 0 {
				return nil, bad("row %d: unknown failure kind %q (known: %s)", i, k, strings.Join(Kinds, ", "))
			}
			if n < 0 || n > MaxCount {
				return nil, bad("row %d: count %d of failure kind %s is out of range (0 to %d)", i, n, k, int64(MaxCount))
			}
		}
		h, err := HistFromWire(w.Latency)
		if err != nil {
			return nil, bad("row %d: %w", i, err)
		}
		hists[i] = h
	}
	return hists, nil
}

func kindIndex(k string) int {
	for i, n := range Kinds {
		if n == k {
			return i
		}
	}
	return -1
}

// ServiceKey returns the name a row's service is stored and queried
// under: group/interface:version, or the interface alone.
func ServiceKey(w *monitor.Row) string { return protocol.ServiceKey(w.Service, w.Version, w.Group) }

// minuteOf returns the minute (Unix seconds) a report is filed under: the
// minute of the middle of its interval.
func minuteOf(r *monitor.Report) int64 {
	mid := r.Start.Add(r.End.Sub(r.Start) / 2).Unix()
	return mid - ((mid%60)+60)%60
}

var upsert = `INSERT INTO calls (minute, side, application, service, method, provider, consumer,
	first_ns, last_ns, calls, successes, failures, ` + strings.Join(kindColumns, ", ") + `,
	bytes_in, bytes_out, elapsed_ns, max_ns, max_concurrent, latency)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (minute, side, application, service, method, provider, consumer) DO UPDATE SET
	first_ns = min(first_ns, excluded.first_ns),
	last_ns = max(last_ns, excluded.last_ns),
	calls = calls + excluded.calls,
	successes = successes + excluded.successes,
	failures = failures + excluded.failures,
	` + kindUpdates() + `
	bytes_in = bytes_in + excluded.bytes_in,
	bytes_out = bytes_out + excluded.bytes_out,
	elapsed_ns = elapsed_ns + excluded.elapsed_ns,
	max_ns = max(max_ns, excluded.max_ns),
	max_concurrent = max(max_concurrent, excluded.max_concurrent),
	latency = minidubbo_hist_add(latency, excluded.latency)`

func kindUpdates() string {
	var b strings.Builder
	for _, c := range kindColumns {
		fmt.Fprintf(&b, "%s = %s + excluded.%s,\n\t", c, c, c)
	}
	return b.String()
}

// errNilContext is the error of a method given a nil context (the SQL
// driver would panic on it).
var errNilContext = errors.New("store: nil context.Context: pass context.Background()")

// Add stores r: its rows are added to the rows of the minute its interval
// is filed under (the minute of its middle). A report already stored (same
// Application, Host, Seq and Start: a process re-sending after a lost
// answer) is not added again, and neither is one that ended before the
// retention. An invalid report (see Validate) is refused whole.
func (s *Store) Add(ctx context.Context, r *monitor.Report) (Outcome, error) {
	if ctx == nil {
		return 0, errNilContext
	}
	if s.opts.ReadOnly {
		return 0, errors.New("store: read-only")
	}
	hists, err := validate(r)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if r.End.Before(now.Add(-s.opts.Retention)) {
		return Expired, nil
	}
	if now.Sub(s.lastPrune) >= time.Minute {
		if _, err := s.prune(ctx, now); err != nil {
			return 0, err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO reports (application, host, seq, start_ns, end_ns, received_ns, dropped, rows)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		r.Application, r.Host, int64(r.Seq), r.Start.UnixNano(), r.End.UnixNano(), now.UnixNano(), r.Dropped, len(r.Rows))
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("store: %w", err)
	} else if n == 0 {
		return Duplicate, nil
	}
	stmt, err := tx.PrepareContext(ctx, upsert)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer stmt.Close()
	minute := minuteOf(r)
	for i := range r.Rows {
		w := &r.Rows[i]
		args := []any{minute, string(w.Side), w.Application, ServiceKey(w),
			w.Method, w.Provider, w.Consumer, r.Start.UnixNano(), r.End.UnixNano(),
			w.Calls, w.Successes, w.Failures}
		for _, k := range Kinds {
			args = append(args, w.FailuresByKind[k])
		}
		args = append(args, w.BytesIn, w.BytesOut, w.ElapsedNanos, w.MaxNanos, w.MaxConcurrent, hists[i].marshal())
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return 0, fmt.Errorf("store: row %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	return Stored, nil
}

// Prune removes the rows and report records older than the retention and
// returns how many rows of calls it removed.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	if ctx == nil {
		return 0, errNilContext
	}
	if s.opts.ReadOnly {
		return 0, errors.New("store: read-only")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prune(ctx, s.opts.Now())
}

func (s *Store) prune(ctx context.Context, now time.Time) (int64, error) {
	cut := now.Add(-s.opts.Retention)
	res, err := s.db.ExecContext(ctx, "DELETE FROM calls WHERE minute <= ?", cut.Unix()-60)
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, "DELETE FROM reports WHERE end_ns < ?", cut.UnixNano()); err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	s.lastPrune = now
	return n, nil
}
