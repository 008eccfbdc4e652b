package monitor

import (
	"errors"
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is what one process counted during one interval: the unit a
// process sends to the monitor service and the monitor server stores.
type Report struct {
	// Application is the reporting process's application name; Host its
	// address (host, or host:port of its first exported protocol).
	Application string `msgpack:"application" json:"application"`
	Host        string `msgpack:"host" json:"host"`
	// Start and End bound the interval the rows were counted in.
	Start time.Time `msgpack:"start" json:"start"`
	End   time.Time `msgpack:"end" json:"end"`
	// Seq numbers a process's reports from 1; with Application and Host it
	// lets the server store a report that is sent twice only once.
	Seq uint64 `msgpack:"seq" json:"seq"`
	// Dropped is how many earlier reports this process dropped from its
	// buffer, unsent, since the last report the monitor accepted.
	Dropped int64 `msgpack:"dropped" json:"dropped"`
	Rows    []Row `msgpack:"rows" json:"rows"`
}

// Failure kinds, the keys of Row.FailuresByKind.
const (
	KindBusiness   = "business"    // the method returned an error
	KindTimeout    = "timeout"     // client or server timeout
	KindNoProvider = "no_provider" // routing or the directory left nobody to call
	KindConnection = "connection"  // connection refused, lost or closed
	KindBusy       = "busy"        // the provider refused for a limit
	KindOther      = "other"
)

// Row holds the counts of one key in one interval.
type Row struct {
	// Side is "consumer" or "provider".
	Side        Side   `msgpack:"side" json:"side"`
	Application string `msgpack:"application" json:"application"`
	Service     string `msgpack:"service" json:"service"`
	Version     string `msgpack:"version" json:"version"`
	Group       string `msgpack:"group" json:"group"`
	Method      string `msgpack:"method" json:"method"`
	// Provider is the provider's host:port. On the consumer side a row with
	// Provider "" holds the call-level counts (once per call, above the
	// cluster) and a row with a provider what was sent to that provider
	// (once per attempt). On the provider side it is the provider's own
	// address.
	Provider string `msgpack:"provider" json:"provider"`
	// Consumer is "application@host" of the consumer: the calling peer on
	// the provider side, the process itself on the consumer side.
	Consumer string `msgpack:"consumer" json:"consumer"`

	Calls          int64            `msgpack:"calls" json:"calls"`
	Successes      int64            `msgpack:"successes" json:"successes"`
	Failures       int64            `msgpack:"failures" json:"failures"`
	FailuresByKind map[string]int64 `msgpack:"failures_by_kind,omitempty" json:"failures_by_kind,omitempty"`
	BytesIn        int64            `msgpack:"bytes_in" json:"bytes_in"`
	BytesOut       int64            `msgpack:"bytes_out" json:"bytes_out"`
	// ElapsedNanos is the summed time of the ended calls; MaxNanos the
	// longest one.
	ElapsedNanos  int64 `msgpack:"elapsed_ns" json:"elapsed_ns"`
	MaxNanos      int64 `msgpack:"max_ns" json:"max_ns"`
	Concurrent    int64 `msgpack:"concurrent" json:"concurrent"`
	MaxConcurrent int64 `msgpack:"max_concurrent" json:"max_concurrent"`
	// Latency is the interval's latency histogram in microseconds.
	Latency Histogram `msgpack:"latency" json:"latency"`
}

// Histogram bounds: 1 µs to 1 hour at 3 significant figures (0.1 %
// relative error, well inside the 1 % the report promises).
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

// NewHistogram returns an empty latency histogram in microseconds with the
// bounds every Report uses, so that any two of them merge exactly.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histSigFigs)
}

// Histogram is a latency histogram in a compact, mergeable wire form: the
// bucket counts of an HdrHistogram with the bounds of NewHistogram, kept
// sparse as (index, count) pairs.
type Histogram struct {
	Index []int32 `msgpack:"i" json:"i,omitempty"`
	Count []int64 `msgpack:"c" json:"c,omitempty"`
}

// EncodeHistogram returns h (made by NewHistogram) in wire form.
func EncodeHistogram(h *hdrhistogram.Histogram) Histogram {
	var out Histogram
	for i, c := range h.Export().Counts {
		if c != 0 {
			out.Index = append(out.Index, int32(i))
			out.Count = append(out.Count, c)
		}
	}
	return out
}

// errHistogram reports a histogram whose wire form does not fit the bounds.
var errHistogram = errors.New("monitor: malformed latency histogram")

// MergeInto adds the counts of w to h, which must have been made by
// NewHistogram. It checks every index against h's size, so a hostile
// report cannot make it allocate or index out of range.
func (w Histogram) MergeInto(h *hdrhistogram.Histogram) error {
	if len(w.Index) != len(w.Count) {
		return fmt.Errorf("%w: %d indexes, %d counts", errHistogram, len(w.Index), len(w.Count))
	}
	if len(w.Index) == 0 {
		return nil
	}
	s := h.Export()
	for k, i := range w.Index {
		if i < 0 || int(i) >= len(s.Counts) || w.Count[k] < 0 {
			return fmt.Errorf("%w: bucket %d count %d", errHistogram, i, w.Count[k])
		}
		s.Counts[i] += w.Count[k]
	}
	*h = *hdrhistogram.Import(s)
	return nil
}

// Decode returns w as a new histogram.
func (w Histogram) Decode() (*hdrhistogram.Histogram, error) {
	h := NewHistogram()
	if err := w.MergeInto(h); err != nil {
		return nil, err
	}
	return h, nil
}
