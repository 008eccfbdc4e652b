package zktest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
