package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/monitor/server"
	"github.com/minidubbo/minidubbo/monitor/store"
)

const reportUsage = `usage: minidubbo report [flags]

Prints the call-count report: from a running monitor server (-monitor) or
straight from its data directory (-data). Examples:

  minidubbo report -since 10m
  minidubbo report -monitor http://127.0.0.1:8080 -service demo.hello.Greeter -by provider
  minidubbo report -data /var/lib/minidubbo -since 24h -format csv

On the consumer side a row without a provider holds the calls as the
application made them (once per call); rows with a provider hold what was
sent to that provider (once per attempt). -by groups rows by provider,
consumer or method; without it there is a row per side, application,
service, method, provider and consumer.

flags:
`

var reportFormats = []string{"table", "json", "csv"}

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, reportUsage)
		fs.PrintDefaults()
	}
	mon := fs.String("monitor", "http://127.0.0.1:8080", "address of the monitor server's HTTP side (its -http), http://host:port or host:port")
	data := fs.String("data", "", "read this data directory instead of asking a monitor server")
	since := fs.String("since", "10m", "how far back: a duration (10m, 1h, 7d) or an RFC 3339 time")
	service := fs.String("service", "", "only this service (group/interface:version, or the interface)")
	by := fs.String("by", "", "group rows by provider, consumer or method (default: every key apart)")
	format := fs.String("format", "table", "table, json or csv")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on getting the report")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "minidubbo report: %v\n", err)
		return 2
	}
	monSet := false
	fs.Visit(func(f *flag.Flag) { monSet = monSet || f.Name == "monitor" })
	switch {
	case fs.NArg() > 0:
		return usageErr(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case monSet && *data != "":
		return usageErr(errors.New("give -monitor or -data, not both"))
	case !slices.Contains(reportFormats, *format):
		return usageErr(fmt.Errorf("unknown -format %q%s (known: %s)", *format, named.DidYouMean(*format, reportFormats), strings.Join(reportFormats, ", ")))
	case *by != "" && !slices.Contains(store.Bys, *by):
		return usageErr(fmt.Errorf("unknown -by %q%s (known: %s)", *by, named.DidYouMean(*by, store.Bys), strings.Join(store.Bys, ", ")))
	case *timeout <= 0:
		return usageErr(errors.New("-timeout must be positive"))
	}
	from, err := server.ParseSince(*since, time.Now(), 0)
	if err != nil {
		return usageErr(fmt.Errorf("-%v", err))
	}
	if *data == "" {
		if _, err := monitorURL(*mon); err != nil {
			return usageErr(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var sum *store.Summary
	if *data != "" {
		sum, err = reportFromData(ctx, *data, store.Query{Since: from, Service: *service, By: *by})
	} else {
		sum, err = reportFromMonitor(ctx, *mon, *since, *service, *by)
	}
	if err != nil {
		fmt.Fprintf(stderr, "minidubbo report: %v\n", err)
		return 1
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(sum)
	case "csv":
		err = writeCSV(stdout, sum)
	default:
		err = writeTable(stdout, sum)
	}
	if err != nil {
		fmt.Fprintf(stderr, "minidubbo report: %v\n", err)
		return 1
	}
	return 0
}

func reportFromData(ctx context.Context, dir string, q store.Query) (*store.Summary, error) {
	st, err := store.Open(dir, store.Options{ReadOnly: true})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w\n(give -data the -data directory of minidubbo monitor; its default is %s)", err, defaultDataDir())
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.Query(ctx, q)
}

// maxReportBytes bounds the answer read from a monitor server.
const maxReportBytes = 64 << 20

// monitorURL reads -monitor: http(s)://host:port, or host:port as the
// monitor's -http flag takes it.
func monitorURL(base string) (*url.URL, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-monitor %q: want http://host:port, the -http address of minidubbo monitor", base)
	}
	return u, nil
}

func reportFromMonitor(ctx context.Context, base, since, service, by string) (*store.Summary, error) {
	u, err := monitorURL(base)
	if err != nil {
		return nil, err
	}
	q := url.Values{"since": {since}}
	if service != "" {
		q.Set("service", service)
	}
	if by != "" {
		q.Set("by", by)
	}
	u = u.JoinPath("api", "report")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("monitor server: %w\n(is minidubbo monitor running there? give -monitor http://HOST:PORT of its -http, or -data DIR to read its data directory)", err)
		}
		return nil, fmt.Errorf("monitor server: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("monitor server: %w", err)
	}
	if len(body) > maxReportBytes {
		return nil, fmt.Errorf("monitor server: answer over %d bytes", maxReportBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("monitor server: %s", e.Error)
		}
		return nil, fmt.Errorf("monitor server: %s", resp.Status)
	}
	var sum store.Summary
	if err := json.Unmarshal(body, &sum); err != nil {
		return nil, fmt.Errorf("monitor server: bad report: %w", err)
	}
	return &sum, nil
}

func kindsText(m map[string]int64) string {
	var parts []string
	for _, k := range store.Kinds {
		if n := m[k]; n != 0 {
			parts = append(parts, k+"="+strconv.FormatInt(n, 10))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func fi(v int64) string { return strconv.FormatInt(v, 10) }

// writeTable prints the rows aligned: names to the left, numbers to the
// right, leaving out the name columns that are empty in every row.
func writeTable(w io.Writer, sum *store.Summary) error {
	rows := "rows"
	if len(sum.Rows) == 1 {
		rows = "row"
	}
	fmt.Fprintf(w, "calls from %s to %s (UTC), %d %s\n", sum.Since.Format("2006-01-02 15:04"), sum.Until.Format("2006-01-02 15:04:05"), len(sum.Rows), rows)
	if len(sum.Rows) == 0 {
		_, err := fmt.Fprintln(w, "no calls reported")
		return err
	}
	type col struct {
		head    string
		numeric bool
		cell    func(r *store.Row) string
	}
	cols := []col{
		{"SIDE", false, func(r *store.Row) string { return r.Side }},
		{"APPLICATION", false, func(r *store.Row) string { return r.Application }},
		{"SERVICE", false, func(r *store.Row) string { return r.Service }},
		{"METHOD", false, func(r *store.Row) string { return r.Method }},
		{"PROVIDER", false, func(r *store.Row) string {
			if r.Provider == "" && r.Side == "consumer" && r.Method != "" {
				return "(calls)"
			}
			return r.Provider
		}},
		{"CONSUMER", false, func(r *store.Row) string { return r.Consumer }},
		{"CALLS", true, func(r *store.Row) string { return fi(r.Calls) }},
		{"OK", true, func(r *store.Row) string { return fi(r.Successes) }},
		{"FAILED", true, func(r *store.Row) string { return fi(r.Failures) }},
		{"QPS", true, func(r *store.Row) string { return ff(r.QPS) }},
		{"AVG MS", true, func(r *store.Row) string { return ff(r.AvgMs) }},
		{"P50 MS", true, func(r *store.Row) string { return ff(r.P50Ms) }},
		{"P99 MS", true, func(r *store.Row) string { return ff(r.P99Ms) }},
		{"MAX MS", true, func(r *store.Row) string { return ff(r.MaxMs) }},
		{"FAILURES BY KIND", false, func(r *store.Row) string { return kindsText(r.FailuresByKind) }},
	}
	cells := make([][]string, len(sum.Rows))
	var keep []col
	for _, c := range cols {
		empty := true
		for ri := range sum.Rows {
			if c.cell(&sum.Rows[ri]) != "" {
				empty = false
				break
			}
		}
		if !empty {
			keep = append(keep, c)
		}
	}
	width := make([]int, len(keep))
	for i, c := range keep {
		width[i] = utf8.RuneCountInString(c.head)
	}
	for ri := range sum.Rows {
		cells[ri] = make([]string, len(keep))
		for i, c := range keep {
			cells[ri][i] = c.cell(&sum.Rows[ri])
			width[i] = max(width[i], utf8.RuneCountInString(cells[ri][i]))
		}
	}
	line := func(vals []string) string {
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if keep[i].numeric {
				b.WriteString(pad + v)
			} else if i < len(vals)-1 {
				b.WriteString(v + pad)
			} else {
				b.WriteString(v)
			}
		}
		return b.String() + "\n"
	}
	heads := make([]string, len(keep))
	for i, c := range keep {
		heads[i] = c.head
	}
	if _, err := io.WriteString(w, line(heads)); err != nil {
		return err
	}
	for _, row := range cells {
		if _, err := io.WriteString(w, line(row)); err != nil {
			return err
		}
	}
	return nil
}

// writeCSV prints every field of every row, one column per failure kind.
func writeCSV(w io.Writer, sum *store.Summary) error {
	cw := csv.NewWriter(w)
	head := []string{"side", "application", "service", "method", "provider", "consumer", "calls", "successes", "failures"}
	for _, k := range store.Kinds {
		head = append(head, "failures_"+k)
	}
	head = append(head, "qps", "avg_ms", "p50_ms", "p99_ms", "max_ms", "bytes_in", "bytes_out")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range sum.Rows {
		rec := []string{r.Side, r.Application, r.Service, r.Method, r.Provider, r.Consumer, fi(r.Calls), fi(r.Successes), fi(r.Failures)}
		for _, k := range store.Kinds {
			rec = append(rec, fi(r.FailuresByKind[k]))
		}
		rec = append(rec, ff(r.QPS), ff(r.AvgMs), ff(r.P50Ms), ff(r.P99Ms), ff(r.MaxMs), fi(r.BytesIn), fi(r.BytesOut))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
