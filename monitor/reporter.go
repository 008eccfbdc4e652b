package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/internal/optcheck"
	"github.com/minidubbo/minidubbo/serialize"
)

// Reporting defaults and bounds; DefaultReporterOptions returns the
// defaults. config refers to these instead of repeating them.
const (
	// DefaultInterval is how often a Reporter reports, as in Dubbo.
	DefaultInterval = time.Minute
	// MinInterval is the shortest interval a Reporter accepts.
	MinInterval = time.Second
	// DefaultBufferReports and DefaultBufferBytes bound the reports that
	// wait for the monitor: an hour of one-minute reports, and 8 MiB.
	DefaultBufferReports = 60
	DefaultBufferBytes   = 8 << 20
	// DefaultSendTimeout bounds one send to the monitor.
	DefaultSendTimeout = 5 * time.Second
)

// ReporterOptions configure a Reporter. As in every layer's options: every
// zero field means the default (DefaultReporterOptions shows them); a
// negative field is invalid (Validate).
type ReporterOptions struct {
	// Send delivers one report to the monitor service, for example the
	// Collect field of a referred CollectorClient. Required. It is called
	// from the reporter's own goroutine, one report at a time, oldest
	// first; an error keeps the report for the next try, except one
	// that says the monitor will never accept it (IsRefused): that report
	// is dropped and counted (ReporterStats.Refused).
	Send func(ctx context.Context, r *Report) error
	// Interval between reports (default DefaultInterval, at least
	// MinInterval).
	Interval time.Duration
	// SendTimeout bounds each Send (default DefaultSendTimeout, at most
	// the interval).
	SendTimeout time.Duration
	// BufferReports and BufferBytes bound the reports waiting for the
	// monitor (defaults DefaultBufferReports, DefaultBufferBytes; bytes as
	// msgpack). On overflow the oldest are dropped and counted.
	BufferReports, BufferBytes int
	// Host, when set, gives Report.Host at each report (for example the
	// first exported address, known only once a service is exported);
	// by default the host of WithIdentity.
	Host func() string
	// Logger (default zap.NewNop()).
	Logger *zap.Logger
}

// DefaultReporterOptions returns the defaults of every field (Send, Host
// and Logger nil; Send is required).
func DefaultReporterOptions() ReporterOptions {
	return ReporterOptions{
		Interval:      DefaultInterval,
		SendTimeout:   DefaultSendTimeout,
		BufferReports: DefaultBufferReports,
		BufferBytes:   DefaultBufferBytes,
	}
}

// Validate returns an error naming the first invalid field: a nil Send, an
// Interval other than 0 (the default) below MinInterval, or a negative
// SendTimeout, BufferReports or BufferBytes.
func (o ReporterOptions) Validate() error {
	switch {
	case o.Send == nil:
		return errors.New("monitor: ReporterOptions.Send is nil (required)")
	case o.Interval != 0 && o.Interval < MinInterval:
		return fmt.Errorf("monitor: report interval %v is below the minimum %v (want 0 for the default %v, or at least %v)", o.Interval, MinInterval, DefaultInterval, MinInterval)
	}
	return optcheck.NonNegative("monitor",
		optcheck.Field{Name: "SendTimeout", Value: int64(o.SendTimeout), Default: DefaultSendTimeout},
		optcheck.Field{Name: "BufferReports", Value: int64(o.BufferReports), Default: DefaultBufferReports},
		optcheck.Field{Name: "BufferBytes", Value: int64(o.BufferBytes), Default: DefaultBufferBytes},
	)
}

// ReporterStats are a Reporter's counters.
type ReporterStats struct {
	// Taken reports were made (the last Seq); Sent were accepted by the
	// monitor; Dropped were dropped unsent from a full buffer; Refused
	// were dropped because the monitor refused them for good (IsRefused:
	// an invalid report, never accepted however often it is sent).
	Taken, Sent, Dropped, Refused uint64
	// Pending reports, of PendingBytes bytes, wait for the monitor.
	Pending, PendingBytes int
	// Failures counts failed sends (refusals included).
	Failures uint64
}

// Reporter sends what a Monitor counted to the monitor service every
// interval, from its own goroutine, so that no call ever waits for it.
// While the monitor is away the reports wait in a bounded buffer and are
// sent in order when it is back; on overflow the oldest are dropped, and
// the next report the monitor accepts carries their count (Dropped).
// Reports are numbered (Seq) so the monitor stores a re-sent one once. A
// report the monitor refuses for good (IsRefused) is dropped, counted
// (Refused) and logged, and the next one is sent, so that it does not hold
// up every later report.
type Reporter struct {
	m *Monitor
	o ReporterOptions

	flush chan chan error
	stop  chan struct{}
	done  chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex // guards the fields below
	buf      []pending
	bufBytes int
	seq      uint64
	sent     uint64
	dropped  uint64
	refused  uint64
	unsaid   int64 // drops not yet carried by an accepted report
	failures uint64
	away     bool // the last send failed
}

type pending struct {
	r    *Report
	size int
}

// NewReporter starts reporting m's counts with o. Close stops it.
func NewReporter(m *Monitor, o ReporterOptions) (*Reporter, error) {
	if m == nil {
		return nil, errors.New("monitor: NewReporter: nil monitor")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := DefaultReporterOptions()
	if o.Interval == 0 {
		o.Interval = d.Interval
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = d.SendTimeout
	}
	o.SendTimeout = min(o.SendTimeout, o.Interval)
	if o.BufferReports == 0 {
		o.BufferReports = d.BufferReports
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = d.BufferBytes
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	r := &Reporter{
		m: m, o: o,
		flush: make(chan chan error),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go r.loop()
	return r, nil
}

func (r *Reporter) loop() {
	defer close(r.done)
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.take()
			r.sendAll(context.Background())
		case reply := <-r.flush:
			r.take()
			reply <- r.sendAll(context.Background())
		case <-r.stop:
			return
		}
	}
}

// Flush takes a report now and tries to send every waiting report; it
// returns the error of the first send that failed, if one did (a report
// the monitor refused is dropped and counted, not returned: Stats.Refused).
func (r *Reporter) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case r.flush <- reply:
	case <-r.done:
		return errors.New("monitor: reporter closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the reporter: it takes the last, partial, interval's report
// and sends what waits until ctx is done. It returns an error if reports
// are left unsent. It is idempotent.
func (r *Reporter) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.take()
		if err := r.sendAll(ctx); err != nil {
			st := r.Stats()
			r.closeErr = fmt.Errorf("monitor: %d reports left unsent at close: %w", st.Pending, err)
		}
	})
	return r.closeErr
}

// Stats returns the reporter's counters.
func (r *Reporter) Stats() ReporterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReporterStats{Taken: r.seq, Sent: r.sent, Dropped: r.dropped, Refused: r.refused, Pending: len(r.buf), PendingBytes: r.bufBytes, Failures: r.failures}
}

// take adds the report of the interval just ended to the buffer, dropping
// the oldest reports that no longer fit.
func (r *Reporter) take() {
	rep := r.m.TakeReport()
	if r.o.Host != nil {
		rep.Host = r.o.Host()
	}
	size, _ := r.sizeOf(rep) // a report always encodes; 0 if not
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	rep.Seq = r.seq
	r.buf = append(r.buf, pending{rep, size})
	r.bufBytes += size
	for len(r.buf) > 0 && (len(r.buf) > r.o.BufferReports || r.bufBytes > r.o.BufferBytes) {
		r.bufBytes -= r.buf[0].size
		r.buf[0] = pending{}
		r.buf = r.buf[1:]
		r.dropped++
		r.unsaid++
	}
}

// sizeOf returns the size of rep as msgpack.
func (r *Reporter) sizeOf(rep *Report) (int, error) {
	b, err := serialize.NewMsgpack().Marshal(rep)
	return len(b), err
}

// sendAll sends the waiting reports, oldest first, and stops at the first
// failure; a report the monitor refuses (IsRefused) is dropped and the
// next one sent.
func (r *Reporter) sendAll(ctx context.Context) error {
	for {
		r.mu.Lock()
		if len(r.buf) == 0 {
			r.mu.Unlock()
			return nil
		}
		p := r.buf[0]
		p.r.Dropped = r.unsaid
		r.mu.Unlock()

		sctx, cancel := context.WithTimeout(ctx, r.o.SendTimeout)
		err := r.o.Send(sctx, p.r)
		cancel()

		r.mu.Lock()
		if err != nil && IsRefused(err) {
			// The monitor answered, and will never take this report:
			// drop it rather than hold up the later ones. Its Dropped
			// count stays unsaid, for the next accepted report.
			r.failures++
			r.refused++
			r.o.Logger.Warn("monitor refused a report; dropped it", zap.Uint64("seq", p.r.Seq), zap.Int("rows", len(p.r.Rows)), zap.Error(err))
			r.unqueue(p)
			r.mu.Unlock()
			continue
		}
		if err != nil {
			r.failures++
			if !r.away {
				r.away = true
				r.o.Logger.Warn("monitor unreachable; reports wait in the buffer", zap.Uint64("seq", p.r.Seq), zap.Error(err))
			}
			r.mu.Unlock()
			return err
		}
		if r.away {
			r.away = false
			r.o.Logger.Info("monitor reachable again", zap.Int("pending", len(r.buf)))
		}
		r.unqueue(p)
		r.unsaid -= p.r.Dropped
		r.sent++
		r.mu.Unlock()
	}
}

// unqueue removes p, just sent, from the head of the buffer. The buffer
// may have dropped p meanwhile (it never does while only this goroutine
// sends, but stay exact). r.mu is held.
func (r *Reporter) unqueue(p pending) {
	if len(r.buf) > 0 && r.buf[0].r == p.r {
		r.bufBytes -= p.size
		r.buf[0] = pending{}
		r.buf = r.buf[1:]
	}
}
