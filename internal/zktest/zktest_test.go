package zktest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/minidubbo/minidubbo/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStandaloneStopKillWipeRestart(t *testing.T) {
	c := zktest.Start(t)
	s := c.Servers[0]
	if got := s.Mode(); got != "standalone" {
		t.Fatalf("mode = %q, want standalone", got)
	}
	if out, err := zktest.FourLetter(s.Addr, "ruok", time.Second); err != nil || !bytes.Equal(out, []byte("imok")) {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	s.Kill()
	if got := s.Mode(); got != "" {
		t.Fatalf("mode after kill = %q, want none", got)
	}
	s.WipeData()
	s.Start()
	if got := s.Mode(); got != "standalone" {
		t.Fatalf("mode after restart = %q", got)
	}
	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
}

func TestEnsembleLeaderFailover(t *testing.T) {
	c := zktest.StartEnsemble(t, 3)
	leaders, followers := 0, 0
	for _, s := range c.Servers {
		switch s.Mode() {
		case "leader":
			leaders++
		case "follower":
			followers++
		}
	}
	if leaders != 1 || followers != 2 {
		t.Fatalf("leaders=%d followers=%d, want 1 and 2", leaders, followers)
	}
	old := c.Leader()
	old.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx, old); err != nil {
		t.Fatalf("after killing leader %d: %v\n%s", old.ID, err, c.Logs())
	}
	old.Start()
	if m := old.Mode(); m != "follower" {
		t.Fatalf("restarted old leader mode = %q, want follower", m)
	}
}

func TestProxyBlock(t *testing.T) {
	c := zktest.Start(t)
	p := zktest.NewProxy(t, c.Servers[0].Addr)
	if out, err := zktest.FourLetter(p.Addr, "ruok", time.Second); err != nil || string(out) != "imok" {
		t.Fatalf("through proxy: %q, %v", out, err)
	}
	p.Block()
	if out, _ := zktest.FourLetter(p.Addr, "ruok", time.Second); len(out) != 0 {
		t.Fatalf("blocked proxy answered %q", out)
	}
	p.Unblock()
	if out, err := zktest.FourLetter(p.Addr, "ruok", time.Second); err != nil || string(out) != "imok" {
		t.Fatalf("after unblock: %q, %v", out, err)
	}
}

func TestFindReportsWhatToInstall(t *testing.T) {
	t.Setenv("ZOOKEEPER_HOME", t.TempDir())
	_, err := zktest.Find()
	if err == nil || !strings.Contains(err.Error(), "apt-get install zookeeper") || !strings.Contains(err.Error(), "ZOOKEEPER_HOME") {
		t.Fatalf("Find with an empty ZOOKEEPER_HOME = %v, want an error saying what to install", err)
	}
}

func TestFindScriptInZookeeperHome(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(home, "bin", "zkServer.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZOOKEEPER_HOME", home)
	l, err := zktest.Find()
	if err != nil {
		t.Fatal(err)
	}
	if l.Script != script {
		t.Fatalf("Find = %+v, want the script %s", l, script)
	}
}

// A server that does not serve within the wait is reported with how long
// it was waited for, what the last srvr probe got (a frozen server: a
// timeout) and the CPU time its process had used.
func TestWaitServingSaysWhy(t *testing.T) {
	c := zktest.Start(t)
	s := c.Servers[0]
	s.Pause()
	defer s.Resume()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	err := s.WaitServing(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitServing on a frozen server = %v, want it to end with its context", err)
	}
	msg := err.Error()
	for _, want := range []string{"not serving after ", "last srvr probe: ", "timeout", "CPU time used by its process: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if runtime.GOOS == "linux" && strings.Contains(msg, "process: unknown") {
		t.Errorf("error %q: the CPU time is known on Linux", msg)
	}
	s.Resume()
	ctx, cancel = context.WithTimeout(t.Context(), zktest.ReadyTimeout)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}
