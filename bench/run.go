package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// caller is one client of a system: Call sends req and returns the echoed
// reply. It is safe for concurrent use and spreads calls over its
// connections.
type caller interface {
	Call(ctx context.Context, req []byte) ([]byte, error)
	Close() error
}

// system is one column of the table.
type system struct {
	name string
	// serve starts serving on ln (or on a listener of its own) and returns
	// the address to dial and any information a client needs.
	serve func(ln net.Listener) (addr, info string, err error)
	// dial returns a caller with conns connections to addr.
	dial func(ctx context.Context, addr, info string, conns int) (caller, error)
}

var registry = map[string]system{}

func register(s system) { registry[s.name] = s }

// order is the default column order: the baseline first, minidubbo last.
var order = []string{"raw", "netrpc", "rpcx", "kitex", "grpc", "minidubbo"}

func systemNames() []string {
	var names []string
	for _, n := range order {
		if _, ok := registry[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

func lookup(name string) (system, error) {
	s, ok := registry[name]
	if !ok {
		return s, fmt.Errorf("unknown system %q (known: %s)", name, strings.Join(systemNames(), ", "))
	}
	return s, nil
}

// runServer serves one system until stdin ends (the parent closing it or
// exiting). Its READY line gives the address to dial, the information a
// client needs ("-" for none) and the address of its stats listener
// (serveStats), where load clients read its Go runtime figures.
func runServer(name string) error {
	s, err := lookup(name)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer sl.Close()
	go serveStats(sl)
	addr, info, err := s.serve(ln)
	if err != nil {
		return err
	}
	if info == "" {
		info = "-"
	}
	fmt.Printf("READY %s %s %s\n", addr, info, sl.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// binaryFor is the executable that serves and loads system name: dir's
// bench-NAME, built to link only that system (go build -tags
// benchone,bench_NAME), when it exists, else self, which links every
// system.
func binaryFor(self, dir, name string) string {
	p := filepath.Join(dir, "bench-"+name)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	return self
}

// serverProc is a running server process.
type serverProc struct {
	name, addr, info, stats string
	bin                     string // its executable, also the load clients'
	cmd                     *exec.Cmd
	stdin                   io.Closer
}

func startServer(bin, name string) (*serverProc, error) {
	cmd := exec.Command(bin, "-serve", name)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &serverProc{name: name, bin: bin, cmd: cmd, stdin: in}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "READY" {
			s.stop()
			return nil, fmt.Errorf("server %s said %q, want READY ADDR INFO STATS", name, l)
		}
		s.addr, s.info, s.stats = f[1], f[2], f[3]
		return s, nil
	case <-time.After(time.Minute):
		s.stop()
		return nil, fmt.Errorf("server %s: not ready after a minute", name)
	}
}

func (s *serverProc) stop() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

type row struct{ callers, size int }

func (r row) String() string {
	if r.size >= 1024 && r.size%1024 == 0 {
		return fmt.Sprintf("%d @ %d KiB", r.callers, r.size/1024)
	}
	return fmt.Sprintf("%d @ %d B", r.callers, r.size)
}

func parseRows(s string) ([]row, error) {
	var rows []row
	for f := range strings.SplitSeq(s, ",") {
		c, b, ok := strings.Cut(strings.TrimSpace(f), "x")
		n, err1 := strconv.Atoi(c)
		m, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n <= 0 || n > 10000 || m <= 0 || m > 4<<20 {
			return nil, fmt.Errorf("row %q: want CALLERSxBYTES, callers 1..10000, bytes 1..4 MiB", f)
		}
		rows = append(rows, row{n, m})
	}
	return rows, nil
}

// runAll starts every server, runs reps interleaved rounds of every row
// against every system and prints the table of medians.
//
// Each system's server and load clients run dir's bench-NAME when it
// exists (a binary linking only that system, see binaryFor), else this
// binary; oneBinary makes them all run this binary.
func runAll(systemList, rowList string, reps, conns int, warmup, duration time.Duration, dir string, oneBinary bool) error {
	if reps < 1 || reps > 20 {
		return fmt.Errorf("reps %d: want 1..20", reps)
	}
	rows, err := parseRows(rowList)
	if err != nil {
		return err
	}
	var names []string
	for n := range strings.SplitSeq(systemList, ",") {
		base, variant, _ := strings.Cut(n, "@")
		if _, err := lookup(base); err != nil {
			return err
		}
		if variant != "" && variant != "all" {
			return fmt.Errorf("system %q: the only variant is NAME@all (run by the binary linking every system)", n)
		}
		names = append(names, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	servers := map[string]*serverProc{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	if dir == "" {
		dir = filepath.Dir(self)
	}
	var own, shared []string
	for _, n := range names {
		base, variant, _ := strings.Cut(n, "@")
		bin := self
		if !oneBinary && variant == "" {
			bin = binaryFor(self, dir, base)
		}
		if bin == self {
			shared = append(shared, n)
		} else {
			own = append(own, n)
		}
		s, err := startServer(bin, base)
		if err != nil {
			return err
		}
		servers[n] = s
	}
	start := time.Now()
	results := map[string][]result{}
	key := func(r row, sys string) string { return r.String() + "/" + sys }
	for rep := range reps {
		for _, r := range rows {
			for i := range names {
				// Rotate the order each round so no system always runs first.
				n := names[(i+rep)%len(names)]
				res, err := runOne(servers[n], r, conns, warmup, duration)
				if err != nil {
					return fmt.Errorf("%s %v: %w", n, r, err)
				}
				fmt.Fprintf(os.Stderr, "round %d %-12s %-10s %9.0f calls/s p50 %6.0f µs p99 %7.0f µs errors %d, CPU µs/call %.1f + %.1f, GCs/10k calls %.2f + %.2f, GC CPU µs/call %.2f + %.2f (%s), other load %.2f CPUs\n",
					rep+1, r, n, res.QPS, res.P50, res.P99, res.Errors, res.ClientCPU, res.ServerCPU,
					res.ClientGo.GCsPer10k, res.ServerGo.GCsPer10k, res.ClientGo.GCCPU, res.ServerGo.GCCPU, res.Binary, res.OtherCPU)
				results[key(r, n)] = append(results[key(r, n)], res)
			}
		}
	}
	var all []result
	for _, rs := range results {
		all = append(all, rs...)
	}
	other := func(x result) float64 { return x.OtherCPU }
	host, _ := os.Hostname()
	fmt.Printf("\n%s, %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s; %d connections per client, %v recorded per run after %v warm-up, median of %d interleaved rounds (%v in all); other load during the recorded windows: median %.2f, highest %.2f CPUs\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOOS, runtime.GOARCH, runtime.Version(), conns, duration, warmup, reps, time.Since(start).Round(time.Second),
		median(all, other), slices.MaxFunc(all, func(a, b result) int { return cmp.Compare(a.OtherCPU, b.OtherCPU) }).OtherCPU)
	if len(own) > 0 {
		fmt.Printf("Servers and load clients of %s: each system's own binary, linking no other system.\n", strings.Join(own, ", "))
	}
	if len(shared) > 0 {
		fmt.Printf("Servers and load clients of %s: one binary linking every system (%s).\n", strings.Join(shared, ", "), filepath.Base(self))
	}
	fmt.Println()
	fmt.Println("| callers @ payload | system | calls/s | × raw (min–max of rounds) | p50 µs | p99 µs | p99.9 µs | failed calls | client CPU µs/call | server CPU µs/call | GCs per 10k calls, client / server | GC CPU µs/call, client / server | raw's CPU per call ÷ this (min–max) |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		raw := results[key(r, "raw")]
		for _, n := range names {
			rs := results[key(r, n)]
			q := median(rs, func(x result) float64 { return x.QPS })
			ratio, cpuRatio := "–", "–"
			if len(raw) == len(rs) && len(rs) > 0 {
				ratio = ratioCell(rs, raw, qpsShare)
				cpuRatio = ratioCell(rs, raw, cpuShare)
			}
			var failed, calls int64
			for _, x := range rs {
				failed += x.Errors
				calls += x.Calls
			}
			gc := func(f func(x result) float64) float64 { return median(rs, f) }
			fmt.Printf("| %s | %s | %s | %s | %.0f | %.0f | %.0f | %d of %d | %.1f | %.1f | %s / %s | %s / %s | %s |\n",
				r, n, thousands(q), ratio,
				median(rs, func(x result) float64 { return x.P50 }),
				median(rs, func(x result) float64 { return x.P99 }),
				median(rs, func(x result) float64 { return x.P999 }),
				failed, calls+failed,
				median(rs, func(x result) float64 { return x.ClientCPU }),
				median(rs, func(x result) float64 { return x.ServerCPU }),
				gcCell(gc(func(x result) float64 { return x.ClientGo.GCsPer10k }), true),
				gcCell(gc(func(x result) float64 { return x.ServerGo.GCsPer10k }), haveGo(rs)),
				gcCell(gc(func(x result) float64 { return x.ClientGo.GCCPU }), true),
				gcCell(gc(func(x result) float64 { return x.ServerGo.GCCPU }), haveGo(rs)),
				cpuRatio)
		}
	}
	for _, r := range rows {
		for _, n := range names {
			for _, x := range results[key(r, n)] {
				if x.FirstError != "" {
					fmt.Printf("\n%s %v: first error: %s", n, r, x.FirstError)
					break
				}
			}
		}
	}
	fmt.Println()
	return nil
}

func runOne(s *serverProc, r row, conns int, warmup, duration time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), warmup+duration+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "-client", s.name, "-addr", s.addr, "-info", s.info,
		"-server-stats", s.stats,
		"-server-pid", strconv.Itoa(s.cmd.Process.Pid), "-callers", strconv.Itoa(r.callers),
		"-size", strconv.Itoa(r.size), "-conns", strconv.Itoa(conns),
		"-warmup", warmup.String(), "-duration", duration.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, err
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, fmt.Errorf("client output %q: %w", out, err)
	}
	if res.Calls == 0 {
		return res, errors.New("no call succeeded: " + res.FirstError)
	}
	return res, nil
}

// gcCell formats a median Go runtime figure, "?" when it was not measured.
func gcCell(v float64, ok bool) string {
	switch {
	case !ok:
		return "?"
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// haveGo says whether every run of rs read the server's Go runtime figures.
func haveGo(rs []result) bool {
	for _, x := range rs {
		if !x.HaveGo {
			return false
		}
	}
	return len(rs) > 0
}

// ratioCell is a system's share of the raw baseline by share (qpsShare or
// cpuShare of a system's run and raw's run of the same round): the median
// over the rounds (each round runs a row's systems one after the other, so
// a change of the machine's load between rounds cancels out), and, with
// more than one round, the lowest and highest of the per-round shares.
func ratioCell(rs, raw []result, share func(sys, raw result) float64) string {
	shares := make([]result, len(rs))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range rs {
		x := share(rs[i], raw[i])
		shares[i].QPS = x
		lo, hi = min(lo, x), max(hi, x)
	}
	m := median(shares, func(x result) float64 { return x.QPS })
	if len(rs) == 1 {
		return fmt.Sprintf("%.2f", m)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", m, lo, hi)
}

// qpsShare is a system's calls/s divided by raw's.
func qpsShare(sys, raw result) float64 {
	if raw.QPS <= 0 {
		return 0
	}
	return sys.QPS / raw.QPS
}

// cpuShare is raw's CPU time per call (client and server together) divided
// by the system's: on a machine whose CPUs the two processes keep busy, the
// share of raw's calls/s the system could reach. It moves less with the
// machine's other load than calls/s do.
func cpuShare(sys, raw result) float64 {
	c := sys.ClientCPU + sys.ServerCPU
	if c <= 0 {
		return 0
	}
	return (raw.ClientCPU + raw.ServerCPU) / c
}

func median(rs []result, f func(result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
