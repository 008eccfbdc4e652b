package config_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/registry/memory"
)

// stubborn has a method that ignores its context until released.
type stubborn struct {
	started chan struct{}
	release chan struct{}
}

func (s *stubborn) Hang(context.Context) (string, error) {
	s.started <- struct{}{}
	<-s.release
	return "released", nil
}

type stubbornClient struct {
	Hang func(ctx context.Context) (string, error)
}

// TestShutdownEndsWhenMethodIgnoresContext: Shutdown returns soon after
// its deadline although a call's method never looks at its context; the
// call is counted as abandoned and its consumer gets an error.
func TestShutdownEndsWhenMethodIgnoresContext(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	svc := &stubborn{started: make(chan struct{}, 1), release: make(chan struct{})}
	// Released after every cleanup (registered first, so it runs last):
	// the abandoned method ends before goleak looks.
	t.Cleanup(func() { close(svc.release) })
	prov := memoryApp(t, reg, config.ServiceConfig{Interface: "test.Stubborn"}, config.ReferenceConfig{})
	_, err := prov.Export(ctx, "orders", svc)
	require.NoError(t, err)
	zero := 0
	cons := memoryApp(t, reg, config.ServiceConfig{}, config.ReferenceConfig{Interface: "test.Stubborn", Check: true, Retries: &zero, Timeout: time.Minute})
	var c stubbornClient
	require.NoError(t, cons.Refer(ctx, "orders", &c))
	called := make(chan error, 1)
	go func() {
		_, err := c.Hang(ctx)
		called <- err
	}()
	<-svc.started

	// 10 s leaves the steps after the drain a second (shutdownGrace, the
	// most they get) before the deadline. A loaded machine kept this
	// process off the CPU for the 30 ms that a 300 ms deadline left,
	// then (load average 20, under -race) for the 300 ms that 3 s left,
	// and Shutdown, on time, then reported the drain it cut short
	// ("while draining calls in progress"), not the abandoned call.
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	returned := make(chan error, 1)
	start := time.Now()
	go func() { returned <- prov.Shutdown(short) }()
	select {
	case err = <-returned:
	case <-ctx.Done():
		t.Fatal("Shutdown did not return")
	}
	t.Logf("Shutdown with a 10 s deadline returned after %v: %v", time.Since(start), err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "abandoned 1 requests")
	require.Equal(t, uint64(1), prov.Abandoned())
	select {
	case err := <-called:
		require.Error(t, err)
	case <-ctx.Done():
		t.Fatal("the abandoned call did not end on the consumer")
	}
}

// TestShutdownWithoutDeadlineUsesTimeout: a context without a deadline
// gets Config.Shutdown.Timeout.
func TestShutdownWithoutDeadlineUsesTimeout(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	svc := &stubborn{started: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(svc.release) })
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://test"}},
		Services:   map[string]config.ServiceConfig{"s": {Interface: "test.Stubborn"}},
		References: map[string]config.ReferenceConfig{"s": {Interface: "test.Stubborn", Check: true, Timeout: time.Minute}},
		Shutdown:   config.ShutdownConfig{Timeout: 300 * time.Millisecond},
	}, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
	require.NoError(t, err)
	_, err = app.Export(ctx, "s", svc)
	require.NoError(t, err)
	var c stubbornClient
	require.NoError(t, app.Refer(ctx, "s", &c))
	go func() { _, _ = c.Hang(ctx) }()
	<-svc.started
	returned := make(chan error, 1)
	go func() { returned <- app.Shutdown(context.Background()) }()
	select {
	case err = <-returned:
	case <-ctx.Done():
		t.Fatal("Shutdown did not return")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// helperEnv makes the test binary run runHelper instead of the tests.
const helperEnv = "MINIDUBBO_CONFIG_TEST_HELPER"

// runHelper is a provider process whose one method hangs, ignoring its
// context, with a call of it in progress. It prints "ready", runs
// Application.Run and prints "run returned: ..." when Run returns.
// MINIDUBBO_SHUTDOWN_TIMEOUT sets shutdown.timeout.
func runHelper(mode string) int {
	if mode == "provider" {
		return runProviderHelper()
	}
	timeout, err := time.ParseDuration(os.Getenv("MINIDUBBO_SHUTDOWN_TIMEOUT"))
	if err != nil {
		fmt.Println("bad MINIDUBBO_SHUTDOWN_TIMEOUT:", err)
		return 2
	}
	log, _ := zap.NewDevelopment() // to stderr
	app, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://helper"}},
		Services:   map[string]config.ServiceConfig{"s": {Interface: "test.Stubborn"}},
		References: map[string]config.ReferenceConfig{"s": {Interface: "test.Stubborn", Check: true, Timeout: time.Hour}},
		Shutdown:   config.ShutdownConfig{Timeout: timeout},
	}, config.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return 2
	}
	ctx := context.Background()
	svc := &stubborn{started: make(chan struct{}, 1), release: make(chan struct{})}
	if _, err := app.Export(ctx, "s", svc); err != nil {
		fmt.Println(err)
		return 2
	}
	var c stubbornClient
	if err := app.Refer(ctx, "s", &c); err != nil {
		fmt.Println(err)
		return 2
	}
	go func() { _, _ = c.Hang(ctx) }()
	<-svc.started
	fmt.Println("ready")
	err = app.Run(ctx)
	fmt.Printf("run returned: %v; abandoned %d\n", err, app.Abandoned())
	return 0
}

// runProviderHelper is a named provider registered in the ZooKeeper at
// MINIDUBBO_ZK (a zookeeper:// address) under the name MINIDUBBO_NAME; it
// prints "ready HOST:PORT" and serves until killed.
func runProviderHelper() int {
	name := os.Getenv("MINIDUBBO_NAME")
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "e2e-provider-" + name},
		Registries: map[string]config.RegistryConfig{"zk": {
			Address: os.Getenv("MINIDUBBO_ZK"), ZooKeeper: config.ZooKeeperConfig{SessionTimeout: 2 * time.Second}, Timeout: 5 * time.Second, CacheFile: "-"}},
		Services: map[string]config.ServiceConfig{"named": {Interface: e2eInterface}},
	})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	u, err := app.Export(ctx, "named", named{name: name})
	cancel()
	if err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Println("ready", u.Address())
	return func() int { select {} }()
}

// helper starts the test binary as a helper process and returns it once
// it printed "ready", with its remaining stdout lines on a channel.
func helper(t *testing.T, shutdownTimeout time.Duration) (*exec.Cmd, <-chan string, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "MINIDUBBO_SHUTDOWN_TIMEOUT="+shutdownTimeout.String())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	ctx := testCtx(t)
	select {
	case l := <-lines:
		require.Equal(t, "ready", l, "helper stderr: %s", stderr.String())
	case <-ctx.Done():
		t.Fatal("helper never got ready")
	}
	// Signals reach Run once it has said so.
	for !strings.Contains(stderr.String(), "running until SIGINT or SIGTERM") {
		select {
		case <-ctx.Done():
			t.Fatalf("Run never started: %s", stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return cmd, lines, stderr
}

// lockedBuffer is a strings.Builder safe for a writer and readers at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitExit waits for cmd to exit, at most bound.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration) error {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(bound):
		t.Fatalf("process still running %v later", bound)
		return nil
	}
}

// TestRunExitsAfterSIGTERM: a real process with a method that ignores its
// context gets SIGTERM; Run returns (the shutdown timeout is 5 s, so the
// steps after the wait have half a second) and reports the abandoned call.
func TestRunExitsAfterSIGTERM(t *testing.T) {
	cmd, lines, stderr := helper(t, 5*time.Second)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var out []string
	for l := range lines {
		out = append(out, l)
	}
	// Far below what a hang would take, far above the 5 s timeout.
	require.NoError(t, waitExit(t, cmd, 60*time.Second), "stderr: %s", stderr)
	t.Logf("exited %v after SIGTERM (shutdown timeout 5 s): %q\nstderr:\n%s", time.Since(start), out, stderr)
	require.Len(t, out, 1, "stderr: %s", stderr)
	require.Contains(t, out[0], "run returned:")
	require.Contains(t, out[0], "context deadline exceeded")
	require.Contains(t, out[0], "abandoned 1")
	require.Contains(t, stderr.String(), "shutdown abandoned calls")
}

// TestSecondSignalExitsAtOnce: with a 10-minute shutdown timeout, a second
// SIGTERM during the shutdown ends the process at once, with status 143.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd, lines, stderr := helper(t, 10*time.Minute)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	ctx := testCtx(t)
	for !strings.Contains(stderr.String(), "shutting down") {
		select {
		case <-ctx.Done():
			t.Fatalf("no shutdown logged: %s", stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := waitExit(t, cmd, 60*time.Second)
	t.Logf("exited %v after the second SIGTERM: %v", time.Since(start), err)
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "got %v; stderr: %s", err, stderr)
	require.Equal(t, 143, ee.ExitCode())
	for l := range lines {
		t.Errorf("unexpected output %q", l)
	}
	require.Contains(t, stderr.String(), "second signal during shutdown")
}

// TestShutdownClosesReferencesByDeadline: a consumer whose two references
// each have a call hanging on a provider shuts down by its deadline, not
// after each reference's 10 s drain timeout in turn.
func TestShutdownClosesReferencesByDeadline(t *testing.T) {
	ctx := testCtx(t)
	reg := memory.New()
	defer reg.Close()
	svc := &stubborn{started: make(chan struct{}, 2), release: make(chan struct{})}
	newApp := func(c *config.Config) *config.Application {
		c.Registries = map[string]config.RegistryConfig{"mem": {Address: "memory://test"}}
		app, err := config.New(c, config.WithRegistry("mem", reg), config.WithLogger(logger(t)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
		return app
	}
	prov := newApp(&config.Config{Services: map[string]config.ServiceConfig{
		"a": {Interface: "test.StubbornA"}, "b": {Interface: "test.StubbornB"}}})
	for _, id := range []string{"a", "b"} {
		_, err := prov.Export(ctx, id, svc)
		require.NoError(t, err)
	}
	cons := newApp(&config.Config{References: map[string]config.ReferenceConfig{
		"a": {Interface: "test.StubbornA", Check: true, Timeout: time.Minute},
		"b": {Interface: "test.StubbornB", Check: true, Timeout: time.Minute}}})
	t.Cleanup(func() { close(svc.release) }) // before the apps' cleanups
	for _, id := range []string{"a", "b"} {
		var c stubbornClient
		require.NoError(t, cons.Refer(ctx, id, &c))
		go func() { _, _ = c.Hang(ctx) }()
		<-svc.started
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	returned := make(chan error, 1)
	go func() { returned <- cons.Shutdown(short) }()
	select {
	case err := <-returned:
		t.Logf("consumer Shutdown with a 300 ms deadline and 2 references with hanging calls returned after %v: %v", time.Since(start), err)
	case <-time.After(8 * time.Second): // less than one reference's 10 s drain
		t.Fatal("consumer Shutdown did not return by its deadline")
	}
}
