// Package zktest starts real ZooKeeper servers for tests: a standalone
// server or an ensemble of three on free loopback ports, each in its own
// directory under t.TempDir(). Members can be stopped, killed with SIGKILL,
// paused, restarted and have their data wiped, so tests can reproduce
// registry outages, data loss and leader elections.
//
// ZooKeeper is found from $ZOOKEEPER_HOME, the Debian package layout
// (/usr/share/java/zookeeper.jar, package "zookeeper") or a zkServer.sh (or
// Homebrew's zkServer) on PATH. Under `go test -short` without CI=true the
// tests that need it are skipped with a reason; otherwise a missing
// ZooKeeper fails the test with what to install.
//
// Every process a Cluster starts is killed in t.Cleanup.
package zktest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// ReadyTimeout bounds how long Start, StartEnsemble and Server.Start wait
// for servers to serve. It was 45 s: three config tests in one run at load
// ~20 failed at it, their servers alive but not serving. A JVM starting on
// a starved machine needs its few seconds of CPU and gets a tenth of a
// core or less; the wait ends as soon as the servers serve, so only a
// start that would have failed takes longer. Its error says what the last
// srvr probe got and how much CPU the server's process had used.
const ReadyTimeout = 2 * time.Minute

// InstallHint says what to install when ZooKeeper is not found.
const InstallHint = "install ZooKeeper 3.8: `apt-get install zookeeper` (Debian/Ubuntu, provides /usr/share/java/zookeeper.jar and a JRE), " +
	"`brew install zookeeper` (macOS), or unpack an Apache ZooKeeper release and set ZOOKEEPER_HOME to it"

// Launcher is how a server process is started: either java with a class
// path, or a zkServer script in start-foreground mode.
type Launcher struct {
	// Java and ClassPath run QuorumPeerMain directly.
	Java, ClassPath string
	// Script is a zkServer.sh (or zkServer) used when Java is empty.
	Script string
}

// String describes the launcher, for messages.
func (l Launcher) String() string {
	if l.Script != "" {
		return "script " + l.Script
	}
	return l.Java + " -cp " + l.ClassPath
}

// command returns the command line that runs the server with cfg.
func (l Launcher) command(cfg, logDir string) *exec.Cmd {
	if l.Script != "" {
		cmd := exec.Command(l.Script, "start-foreground", cfg)
		cmd.Env = append(os.Environ(), "JMXDISABLE=true", "ZOO_LOG_DIR="+logDir,
			"SERVER_JVMFLAGS=-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1")
		return cmd
	}
	return exec.Command(l.Java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+logDir, "-Dzookeeper.admin.enableServer=false",
		"-cp", l.ClassPath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
}

// Find locates a ZooKeeper installation: $ZOOKEEPER_HOME, the Debian layout,
// then zkServer.sh or zkServer on PATH. The error says what to install.
func Find() (Launcher, error) {
	java, javaErr := findJava()
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		if javaErr == nil {
			if cp := homeClassPath(home); cp != "" {
				return Launcher{Java: java, ClassPath: cp}, nil
			}
		}
		for _, s := range []string{"bin/zkServer.sh", "bin/zkServer"} {
			if p := filepath.Join(home, s); isExec(p) {
				return Launcher{Script: p}, nil
			}
		}
		return Launcher{}, fmt.Errorf("zktest: ZOOKEEPER_HOME=%s holds no ZooKeeper jars or bin/zkServer.sh; %s", home, InstallHint)
	}
	const debJar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(debJar); err == nil {
		if javaErr != nil {
			return Launcher{}, fmt.Errorf("zktest: %s found but no java: %v; install a JRE (apt-get install default-jre-headless)", debJar, javaErr)
		}
		cp := debJar
		if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
			cp += ":/usr/share/java/slf4j-simple.jar"
		}
		return Launcher{Java: java, ClassPath: cp}, nil
	}
	for _, s := range []string{"zkServer.sh", "zkServer"} {
		if p, err := exec.LookPath(s); err == nil {
			return Launcher{Script: p}, nil
		}
	}
	return Launcher{}, errors.New("zktest: ZooKeeper not found ($ZOOKEEPER_HOME unset, no /usr/share/java/zookeeper.jar, no zkServer.sh on PATH); " + InstallHint)
}

func findJava() (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		if p := filepath.Join(jh, "bin", "java"); isExec(p) {
			return p, nil
		}
	}
	return exec.LookPath("java")
}

// homeClassPath returns a class path for an unpacked release
// (lib/*.jar plus the zookeeper-*.jar at the top), or "".
func homeClassPath(home string) string {
	var jars []string
	for _, pat := range []string{"*.jar", "lib/*.jar", "share/java/*.jar", "libexec/lib/*.jar", "libexec/*.jar"} {
		m, _ := filepath.Glob(filepath.Join(home, pat))
		jars = append(jars, m...)
	}
	found := false
	for _, j := range jars {
		if strings.HasPrefix(filepath.Base(j), "zookeeper-") {
			found = true
		}
	}
	if !found {
		return ""
	}
	return strings.Join(jars, ":")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Require returns the launcher, or skips t under -short when CI is not
// "true", or fails t with what to install.
func Require(t testing.TB) Launcher {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("zktest: real-ZooKeeper test skipped under -short (run without -short, or with CI=true)")
	}
	l, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Server is one ZooKeeper process (one ensemble member).
type Server struct {
	// ID is the server's myid (1 for a standalone server).
	ID int
	// Addr is the client address, 127.0.0.1:port.
	Addr string
	// Dir holds zoo.cfg, data/ and server.log.
	Dir string

	c      *Cluster
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// Cluster is a standalone server or an ensemble.
type Cluster struct {
	// Servers are the members, in myid order.
	Servers []*Server

	t        testing.TB
	launcher Launcher
}

// Start starts a standalone server and waits until it serves.
func Start(t testing.TB) *Cluster { return start(t, 1) }

// StartEnsemble starts an ensemble of n servers (n >= 3 for a quorum that
// survives one failure) and waits until every member serves.
func StartEnsemble(t testing.TB, n int) *Cluster {
	if n < 1 {
		t.Fatalf("zktest: ensemble of %d servers", n)
	}
	return start(t, n)
}

func start(t testing.TB, n int) *Cluster {
	t.Helper()
	l := Require(t)
	// Ports are picked free, then bound by another process: a port taken
	// in between (other tests run in parallel) makes the server exit with
	// "Address already in use", and a fresh set of ports is tried.
	var err error
	for range startAttempts {
		var c *Cluster
		if c, err = tryStart(t, l, n); err == nil {
			return c
		}
		if c == nil || !strings.Contains(c.Logs(), "Address already in use") {
			break
		}
	}
	t.Fatalf("zktest: %v", err)
	return nil
}

// startAttempts bounds the tries of start when ports were taken meanwhile.
const startAttempts = 4

// tryStart starts n servers on free ports in a new directory. On failure
// the servers are killed and the cluster, when it was built, is returned
// with the error so the caller can read the logs.
func tryStart(t testing.TB, l Launcher, n int) (*Cluster, error) {
	root := t.TempDir()
	c := &Cluster{t: t, launcher: l}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var peers strings.Builder
	if n > 1 {
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i, ports[3*(i-1)+1], ports[3*(i-1)+2])
		}
	}
	for i := 1; i <= n; i++ {
		dir := filepath.Join(root, fmt.Sprintf("srv%d", i))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			return nil, err
		}
		clientPort := ports[3*(i-1)]
		cfg := Config(filepath.Join(dir, "data"), clientPort) + peers.String()
		if n > 1 {
			cfg += "standaloneEnabled=false\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return nil, err
		}
		s := &Server{ID: i, Addr: fmt.Sprintf("127.0.0.1:%d", clientPort), Dir: dir, c: c}
		if err := s.writeMyID(); err != nil {
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	t.Cleanup(c.kill)
	for _, s := range c.Servers {
		if err := s.launch(); err != nil {
			c.kill()
			return c, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	for _, s := range c.Servers {
		if err := s.WaitServing(ctx); err != nil {
			c.kill()
			return c, fmt.Errorf("%v\n%s", err, c.Logs())
		}
	}
	return c, nil
}

// Config returns a zoo.cfg for one server with the settings tests need:
// tickTime 500 ms (session timeouts from 1 s to 10 s), no admin server,
// four-letter words enabled and no per-IP connection limit.
func Config(dataDir string, clientPort int) string {
	return fmt.Sprintf(`tickTime=500
initLimit=20
syncLimit=10
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf,wchs,dump,envi
maxClientCnxns=0
`, dataDir, clientPort)
}

func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	// Below Linux's ephemeral range (32768-60999 by default), so that
	// outgoing connections and other tests' ":0" listeners do not take
	// a port between this check and the server binding it.
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("free port: none found in 20000-32767")
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12768)))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Addrs returns the client addresses of all members.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		a[i] = s.Addr
	}
	return a
}

// Address returns a registry address: zookeeper://h1:p1,h2:p2,...
func (c *Cluster) Address() string { return "zookeeper://" + strings.Join(c.Addrs(), ",") }

// Leader returns the member that reports Mode: leader (or standalone), or
// nil when none does.
func (c *Cluster) Leader() *Server {
	for _, s := range c.Servers {
		if m := s.Mode(); m == "leader" || m == "standalone" {
			return s
		}
	}
	return nil
}

// WaitLeader waits until some member other than except (which may be nil)
// reports Mode: leader or standalone, and returns it.
func (c *Cluster) WaitLeader(ctx context.Context, except *Server) (*Server, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range c.Servers {
			if s == except {
				continue
			}
			if m := s.Mode(); m == "leader" || m == "standalone" {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Follower returns a member that reports Mode: follower, or nil.
func (c *Cluster) Follower() *Server {
	for _, s := range c.Servers {
		if s.Mode() == "follower" {
			return s
		}
	}
	return nil
}

// WaitServing waits until every running member serves.
func (c *Cluster) WaitServing(ctx context.Context) error {
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		if err := s.WaitServing(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Logs returns the tail of every member's server.log, for failure messages.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "--- server %d (%s) log tail:\n%s\n", s.ID, s.Addr, s.LogTail(40))
	}
	return b.String()
}

func (c *Cluster) kill() {
	for _, s := range c.Servers {
		s.signalAndWait(syscall.SIGKILL)
	}
}

func (s *Server) writeMyID() error {
	return os.WriteFile(filepath.Join(s.Dir, "data", "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644)
}

func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("server %d already running", s.ID)
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := s.c.launcher.command(filepath.Join(s.Dir, "zoo.cfg"), s.Dir)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start server %d (%s): %w", s.ID, s.c.launcher, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done, s.paused = cmd, done, false
	return nil
}

// signalAndWait sends sig to the server's process group and waits for it
// to exit (bounded); a paused process is continued first so it can die.
func (s *Server) signalAndWait(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done, paused := s.cmd, s.done, s.paused
	s.cmd, s.done, s.paused = nil, nil, false
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = signalGroup(pid, sig)
	if paused && sig != syscall.SIGKILL {
		_ = signalGroup(pid, sigCont)
	}
	select {
	case <-done:
		return
	case <-time.After(15 * time.Second):
	}
	_ = signalGroup(pid, syscall.SIGKILL)
	<-done
}

// Running reports whether the server process was started and not stopped.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Stop stops the server with SIGTERM and waits for it to exit.
func (s *Server) Stop() { s.signalAndWait(syscall.SIGTERM) }

// Kill kills the server with SIGKILL (a crash) and waits for it to exit.
func (s *Server) Kill() { s.signalAndWait(syscall.SIGKILL) }

// Pause freezes the server with SIGSTOP: it keeps its sockets but answers
// nothing. It returns once every thread of the server has stopped (on
// Linux; kill returns before that, and meanwhile a thread could still
// answer). Resume continues it. (Unix only: on Windows neither does anything.)
func (s *Server) Pause() { s.signal(sigStop, true) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(sigCont, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = signalGroup(s.cmd.Process.Pid, sig)
	s.paused = paused
	if sig == sigStop && !waitStopped(s.cmd.Process.Pid, pauseWait) {
		s.c.t.Logf("zktest: server %d (%s) not wholly stopped %v after SIGSTOP", s.ID, s.Addr, pauseWait)
	}
}

// pauseWait bounds Pause's wait for every thread of the server to stop.
const pauseWait = 10 * time.Second

// WipeData deletes the server's data (snapshots and logs) but keeps its
// myid, as if the disk had been lost. Call it while the server is stopped.
func (s *Server) WipeData() {
	s.c.t.Helper()
	if s.Running() {
		s.c.t.Fatalf("zktest: WipeData on running server %d", s.ID)
	}
	data := filepath.Join(s.Dir, "data")
	if err := os.RemoveAll(data); err != nil {
		s.c.t.Fatalf("zktest: wipe: %v", err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		s.c.t.Fatalf("zktest: wipe: %v", err)
	}
	if err := s.writeMyID(); err != nil {
		s.c.t.Fatalf("zktest: wipe: %v", err)
	}
}

// Start starts a stopped server again on the same ports and data and waits
// until it serves (for an ensemble member: until it has joined a quorum).
func (s *Server) Start() {
	s.c.t.Helper()
	if err := s.launch(); err != nil {
		s.c.t.Fatalf("zktest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		s.c.t.Fatalf("zktest: %v\n%s", err, s.c.Logs())
	}
}

// Restart stops the server with SIGKILL and starts it again.
func (s *Server) Restart() {
	s.Kill()
	s.Start()
}

// Mode returns the server's mode from the srvr command: standalone,
// leader or follower; "" when it does not serve (down, starting, or
// outside a quorum).
func (s *Server) Mode() string {
	m, _ := s.probe()
	return m
}

// probe asks the server for its Mode; without one, why says what came
// instead.
func (s *Server) probe() (mode, why string) {
	out, err := FourLetter(s.Addr, "srvr", time.Second)
	if err != nil {
		return "", err.Error()
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	first := ""
	for sc.Scan() {
		if first == "" {
			first = sc.Text()
		}
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), ""
		}
	}
	return "", fmt.Sprintf("an answer without a Mode: %q", first)
}

// WaitServing waits until the server reports a Mode (it serves clients),
// polling every 50 ms. ruok is not enough: a member outside a quorum
// answers imok without serving. When ctx ends first, the error says how
// long it waited, what the last srvr probe got (refused: the process is
// not listening yet; a timeout: it is too slow to answer; an answer
// without a Mode: not serving yet, an election say) and the CPU time the
// process had used (little: it was starved; much: it is stuck).
func (s *Server) WaitServing(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for {
		mode, why := s.probe()
		if mode != "" {
			return nil
		}
		s.mu.Lock()
		done, cmd := s.done, s.cmd
		s.mu.Unlock()
		if done == nil {
			return fmt.Errorf("server %d (%s) is not running", s.ID, s.Addr)
		}
		select {
		case <-done:
			return fmt.Errorf("server %d (%s) exited before serving", s.ID, s.Addr)
		case <-ctx.Done():
			cpu := "unknown"
			if d, ok := processCPU(cmd.Process.Pid); ok {
				cpu = d.String()
			}
			return fmt.Errorf("server %d (%s) not serving after %v (last srvr probe: %s; CPU time used by its process: %s): %w",
				s.ID, s.Addr, time.Since(start).Round(time.Millisecond), why, cpu, ctx.Err())
		case <-tick.C:
		}
	}
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FourLetter sends a four-letter-word command (srvr, ruok, mntr, ...) to
// addr and returns the answer.
func FourLetter(addr, cmd string, timeout time.Duration) ([]byte, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(conn)
	return buf.Bytes(), err
}

// Client returns a plain ZooKeeper client for servers (host:port), with its
// logging silenced, for tests that look at or change the tree directly;
// t.Cleanup closes it.
func Client(t testing.TB, servers ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(servers, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("zktest: connect %v: %v", servers, err)
	}
	t.Cleanup(c.Close)
	return c
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// CreateChildren creates persistent, world-open nodes named names under
// parent (which must exist) in Multi batches small enough for a loaded
// server to answer within a session's receive timeout. A batch whose
// answer was lost with the connection is looked at and sent again (each
// batch at most 5 times). Tests use it to fill a node with thousands of
// children quickly.
func CreateChildren(c *zk.Conn, parent string, names []string) error {
	const batch = 250
	for i := 0; i < len(names); i += batch {
		part := names[i:min(i+batch, len(names))]
		ops := make([]any, len(part))
		for j, n := range part {
			ops[j] = &zk.CreateRequest{Path: parent + "/" + n, Acl: zk.WorldACL(zk.PermAll)}
		}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if attempt > 0 {
				time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
			}
			if _, err = c.Multi(ops...); err == nil {
				break
			}
			// A multi is all or nothing: when its last node exists, it
			// was applied before the answer was lost.
			if ok, _, xerr := c.Exists(parent + "/" + part[len(part)-1]); xerr == nil && ok {
				err = nil
				break
			}
			if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("zktest: create children %d-%d of %s: %w", i, i+len(part), parent, err)
		}
	}
	return nil
}
