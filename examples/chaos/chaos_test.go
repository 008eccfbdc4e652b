//go:build linux

package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/examples/chaos/chaossvc"
	"github.com/minidubbo/minidubbo/examples/chaos/ledger"
	"github.com/minidubbo/minidubbo/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	full     = flag.Bool("chaos.full", false, "run every scenario at full length (make chaos); default: the quick subset")
	only     = flag.String("chaos.only", "", "run only the scenarios whose name contains this")
	tableOut = flag.String("chaos.table", "", "also write the table (Markdown) to this file")
)

const (
	// sessionTimeout is every process's ZooKeeper session timeout.
	sessionTimeout = 4 * time.Second
	// callTimeout is the consumers' timeout per attempt (failover, 2 retries).
	callTimeout = time.Second
	// stepTimeout bounds every wait for a process or a condition.
	stepTimeout = 60 * time.Second
	// pollEvery is how often conditions are checked.
	pollEvery = 100 * time.Millisecond
)

// timings are the lengths of a run's phases.
type timings struct {
	warm, hold   time.Duration // steady load before the fault; after recovery
	away         time.Duration // a killed or stopped provider stays away
	pause        time.Duration // SIGSTOP to SIGCONT
	zkDown       time.Duration // ZooKeeper down
	netFault     time.Duration // delay or loss on the network
	burst        time.Duration // the burst's length
	burstCallers int
	recoverWait  time.Duration // longest wait for recovery
}

var (
	fullTimings = timings{warm: 3 * time.Second, hold: 2 * time.Second, away: 3 * time.Second,
		pause: 10 * time.Second, zkDown: 30 * time.Second, netFault: 5 * time.Second,
		burst: 10 * time.Second, burstCallers: 5000, recoverWait: 60 * time.Second}
	quickTimings = timings{warm: time.Second, hold: time.Second, away: time.Second,
		pause: 3 * time.Second, zkDown: 3 * time.Second, netFault: 2 * time.Second,
		burst: 2 * time.Second, burstCallers: 500, recoverWait: 40 * time.Second}
)

var (
	providers = []string{"p1", "p2", "p3"}
	consumers = []string{"c1", "c2"}
)

// scenario is one row of the table.
type scenario struct {
	name string
	// quick puts the scenario in the quick subset `go test` runs;
	// noFail makes the quick run assert that no call failed.
	quick, noFail bool
	// ensemble runs a 3-server ZooKeeper ensemble instead of one server.
	ensemble bool
	// zkProxied lists the processes that reach ZooKeeper through a proxy
	// the scenario can cut (a partition).
	zkProxied []string
	// netProxied registers p1 at a fault proxy's address, so every
	// consumer reaches it through the proxy.
	netProxied bool
	// fault injects the fault and returns when it ended (a provider or
	// consumer process started again, SIGCONT, ZooKeeper serving again,
	// the partition or network fault lifted), the providers that must
	// serve every one of watchers again for recovery (nil: no recovery to
	// measure), and those consumers.
	fault func(e *env) (end time.Time, watch, watchers []string)
}

var scenarios = []scenario{
	{name: "provider SIGKILL, restarted", quick: true, noFail: true, fault: func(e *env) (time.Time, []string, []string) {
		e.kill(e.provs["p1"], syscall.SIGKILL)
		e.sleep(e.tm.away)
		end := time.Now()
		e.startProvider("p1", 0)
		return end, []string{"p1"}, consumers
	}},
	{name: "provider SIGSTOP 10 s, SIGCONT", fault: func(e *env) (time.Time, []string, []string) {
		p := e.provs["p1"]
		e.signal(p, syscall.SIGSTOP)
		e.sleep(e.tm.pause)
		if got, ok := e.registered(); ok && !slices.Contains(got, p.addr) {
			e.notef("p1's session expired during the pause (node gone)")
		}
		e.signal(p, syscall.SIGCONT)
		end := time.Now()
		e.noteRegistry(end)
		return end, []string{"p1"}, consumers
	}},
	{name: "provider SIGTERM (graceful), restarted", quick: true, noFail: true, fault: func(e *env) (time.Time, []string, []string) {
		start := time.Now()
		e.kill(e.provs["p1"], syscall.SIGTERM)
		e.notef("p1 exited %s after SIGTERM", secs(time.Since(start)))
		e.sleep(e.tm.away)
		end := time.Now()
		e.startProvider("p1", 0)
		return end, []string{"p1"}, consumers
	}},
	{name: "provider restarted on the same port", fault: func(e *env) (time.Time, []string, []string) {
		p := e.provs["p1"]
		e.kill(p, syscall.SIGKILL)
		end := time.Now()
		e.startProvider("p1", p.port)
		return end, []string{"p1"}, consumers
	}},
	{name: "ZooKeeper down 30 s", fault: func(e *env) (time.Time, []string, []string) {
		e.zk.Servers[0].Kill()
		e.sleep(e.tm.zkDown)
		e.zk.Servers[0].Start()
		end := time.Now()
		e.noteRegistry(end)
		return end, providers, consumers
	}},
	{name: "provider SIGKILL while ZooKeeper is down", fault: func(e *env) (time.Time, []string, []string) {
		s := e.zk.Servers[0]
		s.Kill()
		e.sleep(e.tm.away)
		p1 := e.provs["p1"]
		e.kill(p1, syscall.SIGKILL)
		e.sleep(e.tm.away)
		s.Start()
		back := time.Now()
		// p1's node lingers until its session expires on the server.
		if e.waitFor(3*sessionTimeout+stepTimeout/4, func() bool {
			got, ok := e.registered()
			return ok && !slices.Contains(got, p1.addr)
		}) {
			e.notef("dead p1's node listed until %s after ZooKeeper returned", secs(time.Since(back)))
		} else {
			e.notef("dead p1 still listed %s after ZooKeeper returned", secs(time.Since(back)))
		}
		end := time.Now()
		e.startProvider("p1", 0)
		return end, []string{"p1"}, consumers
	}},
	{name: "ZooKeeper restarted with its data wiped", fault: func(e *env) (time.Time, []string, []string) {
		s := e.zk.Servers[0]
		s.Kill()
		s.WipeData()
		s.Start()
		end := time.Now()
		e.noteRegistry(end)
		return end, providers, consumers
	}},
	{name: "session expiry (p1, c1 partitioned)", zkProxied: []string{"p1", "c1"}, fault: func(e *env) (time.Time, []string, []string) {
		start := time.Now()
		e.zkProxy.Block()
		// The server expires p1's session: its node goes.
		if !e.waitFor(3*sessionTimeout+stepTimeout/4, func() bool {
			got, ok := e.registered()
			return ok && !slices.Contains(got, e.provs["p1"].addr)
		}) {
			e.notef("p1's node still listed %s into the partition", secs(time.Since(start)))
		} else {
			e.notef("p1's session expired %s into the partition", secs(time.Since(start)))
		}
		e.sleep(time.Second)
		e.zkProxy.Unblock()
		end := time.Now()
		e.noteRegistry(end)
		return end, []string{"p1"}, consumers
	}},
	{name: "ensemble: leader, then a follower killed", ensemble: true, fault: func(e *env) (time.Time, []string, []string) {
		leader := e.zk.Leader()
		if leader == nil {
			e.t.Fatal("no leader")
		}
		start := time.Now()
		leader.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		_, err := e.zk.WaitLeader(ctx, leader)
		cancel()
		if err != nil {
			e.t.Fatal(err)
		}
		e.notef("new leader after %s", secs(time.Since(start)))
		e.sleep(e.tm.away)
		leader.Start()
		follower := e.zk.Follower()
		if follower == nil {
			e.t.Fatal("no follower")
		}
		follower.Kill()
		e.sleep(e.tm.away)
		follower.Start()
		end := time.Now()
		e.noteRegistry(end)
		return end, providers, consumers
	}},
	{name: "consumer restarted while ZooKeeper is down", fault: func(e *env) (time.Time, []string, []string) {
		s := e.zk.Servers[0]
		s.Kill()
		e.sleep(e.tm.away)
		e.kill(e.cons["c2"], syscall.SIGTERM)
		end := time.Now()
		e.startConsumer("c2", 8, 20*time.Millisecond, 0)
		if !e.waitServed([]string{"c2"}, providers, end, e.tm.recoverWait) {
			e.notef("restarted c2 not served by every provider while ZooKeeper was down")
		}
		e.sleep(e.tm.hold)
		s.Start()
		e.noteRegistry(time.Now())
		return end, providers, []string{"c2"}
	}},
	{name: "provider nodes deleted (registry says empty) 5 s", fault: func(e *env) (time.Time, []string, []string) {
		n := e.deleteProviderNodes()
		e.notef("%d provider nodes deleted", n)
		e.sleep(e.tm.netFault)
		// A provider that starts now brings a non-empty list again.
		end := time.Now()
		e.startProvider("p4", 0)
		return end, []string{"p4"}, consumers
	}},
	{name: "burst: 5,000 concurrent callers for 10 s", fault: func(e *env) (time.Time, []string, []string) {
		p := e.startConsumer("burst", e.tm.burstCallers, 0, e.tm.burst)
		start := time.Now()
		if !e.waitExit(p, e.tm.burst+stepTimeout) {
			e.notef("burst consumer did not end in time")
			e.kill(p, syscall.SIGKILL)
		}
		var sum struct{ Calls, OK, Failed int64 }
		if err := json.Unmarshal([]byte(p.out.last()), &sum); err != nil {
			e.notef("burst consumer printed %q", p.out.last())
		} else {
			e.notef("the burst's %d callers made %d calls in %s, %d failed", e.tm.burstCallers, sum.Calls, secs(time.Since(start)), sum.Failed)
		}
		var peaks []string
		for _, name := range providers {
			peaks = append(peaks, name+" "+peakRSS(e.provs[name]))
		}
		e.notef("peak RSS: burst consumer %s, %s", peakRSS(p), strings.Join(peaks, ", "))
		delete(e.cons, "burst")
		return time.Time{}, nil, nil
	}},
	{name: "network delay 1.5 s to p1 for 5 s", netProxied: true, fault: func(e *env) (time.Time, []string, []string) {
		e.net.SetDelay(callTimeout * 3 / 2)
		e.sleep(e.tm.netFault)
		e.net.SetDelay(0)
		return time.Now(), []string{"p1"}, consumers
	}},
	{name: "network loss to p1 for 5 s (connections cut)", quick: true, noFail: true, netProxied: true, fault: func(e *env) (time.Time, []string, []string) {
		e.net.SetDrop(true)
		e.sleep(e.tm.netFault)
		e.net.SetDrop(false)
		return time.Now(), []string{"p1"}, consumers
	}},
}

// row is one line of the table.
type row struct {
	name      string
	tally     ledger.Tally
	recovered bool
	recovery  time.Duration
	measured  bool // a recovery was to be measured
	notes     []string
	wall      time.Duration
	broken    bool // the harness failed (see the test log)
}

// TestChaos runs the scenarios (the quick subset unless -chaos.full) and
// prints the table. The quick run asserts the ledger's arithmetic, that
// no call was lost, that every consumer used the returning provider again,
// and that no call failed where the scenario says so.
func TestChaos(t *testing.T) {
	zktest.Require(t)
	tm := quickTimings
	if *full {
		tm = fullTimings
	}
	bins := buildPrograms(t)
	started := time.Now()
	var rows []row
	for _, s := range scenarios {
		if !*full && !s.quick || *only != "" && !strings.Contains(s.name, *only) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ran := false
			defer func() { // a scenario the harness could not finish still gets its row
				if !ran {
					rows = append(rows, row{name: s.name, broken: true})
				}
			}()
			r := runScenario(t, s, tm, bins)
			ran = true
			rows = append(rows, r)
			t.Logf("%s: calls %d, failed %d (%s), lost %d, duplicated %d, recovery %s; %s",
				s.name, r.tally.Calls, r.tally.Failed, r.tally.Kinds(), r.tally.Lost(), r.tally.Duplicated, r.recoveryString(), strings.Join(r.notes, "; "))
			if err := r.tally.Check(); err != nil {
				t.Error(err)
			}
			if !*full {
				if r.tally.Calls == 0 {
					t.Error("no calls")
				}
				if r.tally.Lost() != 0 {
					t.Errorf("%d calls lost (%d succeeded unexecuted, %d unanswered)", r.tally.Lost(), r.tally.NotExecuted, r.tally.Unanswered)
				}
				if s.noFail && r.tally.Failed != 0 {
					t.Errorf("%d calls failed: %s", r.tally.Failed, r.tally.Kinds())
				}
				if r.measured && !r.recovered {
					t.Error("the consumers did not use the returning provider again")
				}
			}
		})
	}
	table := formatTable(rows, time.Since(started))
	if *full {
		fmt.Print(table)
	} else {
		t.Log("\n" + table)
	}
	if *tableOut != "" {
		if err := os.WriteFile(*tableOut, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func (r row) recoveryString() string {
	switch {
	case !r.measured:
		return "-"
	case !r.recovered:
		return "not recovered"
	}
	return secs(r.recovery)
}

func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

func formatTable(rows []row, wall time.Duration) string {
	var b strings.Builder
	b.WriteString("| scenario | calls | failed | lost | duplicated | recovery | p99 | notes |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range rows {
		if r.broken {
			fmt.Fprintf(&b, "| %s | | | | | | | the harness failed: see the test log |\n", r.name)
			continue
		}
		notes := slices.Clone(r.notes)
		if r.tally.Failed > 0 {
			notes = append([]string{"failed: " + r.tally.Kinds()}, notes...)
		}
		if d := len(r.tally.DuplicatedElapsed); d > 0 {
			slow := 0
			for _, el := range r.tally.DuplicatedElapsed {
				if el >= callTimeout {
					slow++
				}
			}
			notes = append(notes, fmt.Sprintf("%d of %d duplicates waited out a %s timeout", slow, d, callTimeout))
		}
		if r.tally.FailedButExecuted > 0 {
			notes = append(notes, fmt.Sprintf("%d failed calls had run", r.tally.FailedButExecuted))
		}
		if r.tally.Unanswered > 0 {
			notes = append(notes, fmt.Sprintf("%d never answered", r.tally.Unanswered))
		}
		notes = append(notes, "took "+secs(r.wall))
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s |\n", r.name, r.tally.Calls, r.tally.Failed,
			r.tally.Lost(), r.tally.Duplicated, r.recoveryString(), millis(r.tally.P99), strings.Join(notes, "; "))
	}
	fmt.Fprintf(&b, "\n%d scenarios in %s; steady load: 2 consumers x 8 callers, 20 ms apart; failover, 2 retries, %s per attempt; ZooKeeper session %s.\n",
		len(rows), wall.Round(time.Second), callTimeout, sessionTimeout)
	return b.String()
}

// buildPrograms builds the provider and consumer once into a temporary
// directory.
func buildPrograms(t *testing.T) string {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// One go build for both programs: it links them at once.
	out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./provider", "./consumer").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./provider ./consumer: %v\n%s", err, out)
	}
	return dir
}

// env is one scenario's world: ZooKeeper, processes and their ledgers.
type env struct {
	t    *testing.T
	tm   timings
	bins string
	dir  string

	zk        *zktest.Cluster
	zkProxy   *zktest.Proxy
	zkProxied map[string]bool
	net       *faultProxy
	netPort   int // p1's listen port, behind net
	zkc       *zk.Conn

	procs     []*proc          // every process started, for cleanup
	provs     map[string]*proc // the running incarnation by name
	cons      map[string]*proc
	consFiles map[string][]string // ledgers by consumer
	provFiles []string
	tail      *ledger.Tail
	seq       int
	notes     []string
}

func runScenario(t *testing.T, s scenario, tm timings, bins string) row {
	began := time.Now()
	e := &env{t: t, tm: tm, bins: bins, dir: t.TempDir(), zkProxied: map[string]bool{},
		provs: map[string]*proc{}, cons: map[string]*proc{}, consFiles: map[string][]string{}, tail: ledger.NewTail()}
	t.Cleanup(e.killAll)
	if s.ensemble {
		e.zk = zktest.StartEnsemble(t, 3)
	} else {
		e.zk = zktest.Start(t)
	}
	for _, n := range s.zkProxied {
		e.zkProxied[n] = true
	}
	if len(s.zkProxied) > 0 {
		e.zkProxy = zktest.NewProxy(t, e.zk.Servers[0].Addr)
	}
	if s.netProxied {
		e.netPort = freePort(t)
		e.net = newFaultProxy(t, "127.0.0.1:"+strconv.Itoa(e.netPort))
	}
	for _, p := range providers {
		port := 0
		if p == "p1" && s.netProxied {
			port = e.netPort
		}
		e.startProvider(p, port)
	}
	warmFrom := time.Now()
	for _, c := range consumers {
		e.startConsumer(c, 8, 20*time.Millisecond, 0)
	}
	if !e.waitServed(consumers, providers, warmFrom, stepTimeout) {
		t.Fatalf("consumers not served by every provider within %s", stepTimeout)
	}
	e.sleep(tm.warm)

	end, watch, watchers := s.fault(e)
	r := row{name: s.name, measured: watch != nil}
	if r.measured {
		e.waitServed(watchers, watch, end, tm.recoverWait)
	}
	e.sleep(tm.hold)
	e.stopAll()

	var all []string
	for _, c := range slices.Sorted(mapsKeys(e.consFiles)) {
		all = append(all, e.consFiles[c]...)
	}
	tally, err := ledger.Analyze(all, e.provFiles)
	if err != nil {
		t.Fatal(err)
	}
	r.tally = tally
	if r.measured {
		files := map[string][]string{}
		for _, c := range watchers {
			files[c] = e.consFiles[c]
		}
		r.recovery, r.recovered, err = ledger.Recovery(files, watch, end)
		if err != nil {
			t.Fatal(err)
		}
	}
	r.notes = e.notes
	r.wall = time.Since(began)
	return r
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (e *env) notef(format string, args ...any) {
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

// sleep lets the load run for d: the length of a phase, not a wait for
// a condition.
func (e *env) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-e.t.Context().Done():
	}
}

// waitFor polls cond until it holds or d passes.
func (e *env) waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || e.t.Context().Err() != nil {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// waitServed waits until every one of consumers has been served by every
// one of provs at or after since.
func (e *env) waitServed(consumers, provs []string, since time.Time, d time.Duration) bool {
	return e.waitFor(d, func() bool {
		if err := e.tail.Poll(); err != nil {
			e.t.Fatal(err)
		}
		return e.tail.ServedSince(consumers, provs, since)
	})
}

// registryAddr is the ZooKeeper address process name uses.
func (e *env) registryAddr(name string) string {
	if e.zkProxied[name] {
		return "zookeeper://" + e.zkProxy.Addr
	}
	return e.zk.Address()
}

// registered lists the provider addresses ZooKeeper holds; ok is false
// when ZooKeeper did not answer within a few seconds.
func (e *env) registered() (addrs []string, ok bool) {
	if e.zkc == nil {
		c, _, err := zk.Connect(e.zk.Addrs(), sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			e.t.Fatal(err)
		}
		e.zkc = c
		e.t.Cleanup(c.Close)
	}
	type answer struct {
		kids []string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		kids, _, err := e.zkc.Children("/dubbo/" + chaossvc.Interface + "/providers")
		done <- answer{kids, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		// The request stays queued on the client until it connects or
		// closes; the goroutine ends then.
		return nil, false
	}
	if a.err != nil {
		return nil, false
	}
	for _, k := range a.kids {
		if u, err := urlAddress(k); err == nil {
			addrs = append(addrs, u)
		}
	}
	return addrs, true
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// deleteProviderNodes deletes every provider node from ZooKeeper, as a
// careless operator or cleanup script would, and returns how many.
func (e *env) deleteProviderNodes() int {
	if _, ok := e.registered(); !ok { // connects e.zkc
		e.t.Fatal("ZooKeeper does not answer")
	}
	dir := "/dubbo/" + chaossvc.Interface + "/providers"
	kids, _, err := e.zkc.Children(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range kids {
		if err := e.zkc.Delete(dir+"/"+k, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			e.t.Fatal(err)
		}
	}
	return len(kids)
}

var hostPort = regexp.MustCompile(`^dubbo://([^/]+)/`)

// urlAddress returns host:port from an escaped provider node name.
func urlAddress(node string) (string, error) {
	s, err := url.QueryUnescape(node)
	if err != nil {
		return "", err
	}
	m := hostPort.FindStringSubmatch(s)
	if m == nil {
		return "", errors.New("not a provider URL")
	}
	return m[1], nil
}

// noteRegistry waits until ZooKeeper lists every running provider's
// address again and notes how long after since that was.
func (e *env) noteRegistry(since time.Time) {
	want := make([]string, 0, len(e.provs))
	for _, p := range e.provs {
		want = append(want, p.addr)
	}
	ok := e.waitFor(stepTimeout, func() bool {
		got, ok := e.registered()
		if !ok {
			return false
		}
		for _, a := range want {
			if !slices.Contains(got, a) {
				return false
			}
		}
		return true
	})
	if ok {
		e.notef("ZooKeeper lists all providers %s after", secs(time.Since(since)))
	} else {
		e.notef("ZooKeeper did not list all providers within %s", stepTimeout)
	}
}

// proc is one provider or consumer process.
type proc struct {
	name string // p1, c2: the same across restarts
	cmd  *exec.Cmd
	done chan struct{}
	out  *lineWriter
	log  string
	addr string // provider: registered host:port
	port int    // provider: listen port
}

func (e *env) start(name string, args ...string) *proc {
	e.seq++
	logPath := filepath.Join(e.dir, fmt.Sprintf("%s.%d.log", name, e.seq))
	logf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{name: name, done: make(chan struct{}), out: newLineWriter(), log: logPath}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		e.t.Fatal(err)
	}
	e.procs = append(e.procs, p)
	go func() {
		_ = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p
}

// firstLine waits for the process's first line of output.
func (e *env) firstLine(p *proc) string {
	select {
	case l := <-p.out.first:
		return l
	case <-p.done:
		e.t.Fatalf("%s exited before it was ready:\n%s", p.name, tail(p.log))
	case <-time.After(stepTimeout):
		e.t.Fatalf("%s not ready within %s:\n%s", p.name, stepTimeout, tail(p.log))
	}
	return ""
}

var servingLine = regexp.MustCompile(`^serving (\S+) at (\S+)$`)

// startProvider starts provider name on port (0: any) and waits until it
// is registered.
func (e *env) startProvider(name string, port int) *proc {
	seq := e.seq + 1
	cfg := filepath.Join(e.dir, fmt.Sprintf("%s.%d.yaml", name, seq))
	register := ""
	if name == "p1" && e.net != nil {
		register = fmt.Sprintf(", register_address: %q", e.net.Addr())
	}
	yaml := fmt.Sprintf(`application: {name: chaos-provider}
registries:
  zk: {address: %q, zookeeper: {session_timeout: %s}, timeout: 5s, cache_file: "-"}
protocols:
  dubbo: {port: %d%s}
services:
  chaos: {interface: %s, timeout: %s, warmup: 0s}
shutdown: {timeout: 5s}
`, e.registryAddr(name), sessionTimeout, port, register, chaossvc.Interface, callTimeout)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		e.t.Fatal(err)
	}
	ledgerPath := filepath.Join(e.dir, fmt.Sprintf("%s.%d.executed", name, seq))
	e.provFiles = append(e.provFiles, ledgerPath)
	p := e.start(name, filepath.Join(e.bins, "provider"), "-config", cfg, "-name", name, "-ledger", ledgerPath, "-v")
	m := servingLine.FindStringSubmatch(e.firstLine(p))
	if m == nil || m[1] != name {
		e.t.Fatalf("%s printed %q", name, m)
	}
	p.addr = m[2]
	p.port = port
	if port == 0 {
		_, ps, _ := net.SplitHostPort(p.addr)
		p.port, _ = strconv.Atoi(ps)
	}
	e.provs[name] = p
	return p
}

// startConsumer starts consumer name (a restart gets fresh call ids) with
// its load, and waits until its reference is built.
func (e *env) startConsumer(name string, concurrency int, interval, duration time.Duration) *proc {
	seq := e.seq + 1
	cfg := filepath.Join(e.dir, fmt.Sprintf("%s.%d.yaml", name, seq))
	yaml := fmt.Sprintf(`application: {name: chaos-consumer}
registries:
  zk: {address: %q, zookeeper: {session_timeout: %s}, timeout: 5s, cache_file: %q}
references:
  chaos: {interface: %s, cluster: failover, retries: 2, timeout: %s, loadbalance: random}
shutdown: {timeout: 5s}
`, e.registryAddr(name), sessionTimeout, filepath.Join(e.dir, name+".cache"), chaossvc.Interface, callTimeout)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		e.t.Fatal(err)
	}
	ledgerPath := filepath.Join(e.dir, fmt.Sprintf("%s.%d.calls", name, seq))
	e.consFiles[name] = append(e.consFiles[name], ledgerPath)
	e.tail.Add(name, ledgerPath)
	idPrefix := name
	if n := len(e.consFiles[name]); n > 1 {
		idPrefix = fmt.Sprintf("%s.r%d", name, n-1)
	}
	p := e.start(name, filepath.Join(e.bins, "consumer"), "-config", cfg, "-name", idPrefix, "-ledger", ledgerPath,
		"-concurrency", strconv.Itoa(concurrency), "-interval", interval.String(), "-duration", duration.String(), "-v")
	if l := e.firstLine(p); l != "ready "+idPrefix {
		e.t.Fatalf("%s printed %q", name, l)
	}
	e.cons[name] = p
	return p
}

func (e *env) signal(p *proc, sig syscall.Signal) {
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil {
		e.t.Fatalf("signal %s %v: %v", p.name, sig, err)
	}
}

func (e *env) waitExit(p *proc, d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// kill sends sig and waits for the process to exit; one that outlives
// stepTimeout is killed, and that is noted.
func (e *env) kill(p *proc, sig syscall.Signal) {
	_ = syscall.Kill(p.cmd.Process.Pid, sig)
	if !e.waitExit(p, stepTimeout) {
		e.notef("%s still running %s after %v; killed", p.name, stepTimeout, sig)
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// stopAll stops the consumers (they finish their calls and write their
// ledgers), then the providers, gracefully.
func (e *env) stopAll() {
	for _, group := range []map[string]*proc{e.cons, e.provs} {
		for _, p := range group {
			select {
			case <-p.done:
			default:
				_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
			}
		}
		for _, name := range slices.Sorted(mapsKeys(group)) {
			p := group[name]
			if !e.waitExit(p, stepTimeout) {
				e.notef("%s still running %s after SIGTERM; killed", name, stepTimeout)
				_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
			if p.cmd.ProcessState != nil && !p.cmd.ProcessState.Success() {
				e.notef("%s exited with %v: %s", name, p.cmd.ProcessState, lastLine(p.log))
			}
		}
	}
}

// killAll kills whatever still runs (a failed scenario).
func (e *env) killAll() {
	for _, p := range e.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
		<-p.done
	}
}

// peakRSS is the process's peak resident memory: from its rusage once it
// exited, else from /proc.
func peakRSS(p *proc) string {
	kb := int64(-1)
	select {
	case <-p.done:
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			kb = int64(ru.Maxrss) // KiB on Linux
		}
	default:
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					kb, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				}
			}
		}
	}
	if kb < 0 {
		return "?"
	}
	return strconv.FormatInt(kb/1024, 10) + " MiB"
}

// lineWriter is a process's stdout: it hands the first line over and
// keeps the last one.
type lineWriter struct {
	first chan string
	mu    sync.Mutex
	buf   bytes.Buffer
	lines int
	final string
}

func newLineWriter() *lineWriter { return &lineWriter{first: make(chan string, 1)} }

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := string(w.buf.Next(i + 1))
		line = strings.TrimSuffix(line, "\n")
		if w.lines == 0 {
			w.first <- line
		}
		w.lines++
		w.final = line
	}
	if w.buf.Len() > 1<<20 { // bounded: output without newlines is dropped
		w.buf.Reset()
	}
	return len(b), nil
}

func (w *lineWriter) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.final
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(path string) string {
	lines := strings.Split(tail(path), "\n")
	return lines[len(lines)-1]
}

// freePort returns a loopback port that was free, below the ephemeral
// range so outgoing connections do not take it meanwhile.
func freePort(t *testing.T) int {
	for range 1000 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12768)))
		if err != nil {
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		return port
	}
	t.Fatal("no free port in 20000-32767")
	return 0
}
