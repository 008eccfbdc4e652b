package dubbo

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func waitDone(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed")
	}
}

func TestCallCtxDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	c := newCallCtx(parent, 200*time.Millisecond)
	release := c.release
	defer release()
	if c.Value(ctxKey{}) != "v" {
		t.Fatal("value not passed through")
	}
	dl, ok := c.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	// An error is wrong only if the deadline had not passed when Err
	// returned: a test goroutine descheduled for longer than the timeout
	// (a loaded machine) sees it passed, rightly.
	if err := c.Err(); err != nil && time.Now().Before(dl) {
		t.Fatalf("Err before the deadline: %v", err)
	}
	waitDone(t, c.Done())
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
}

// Without Done ever asked for, Err still sees the deadline pass, and a
// later Done is closed.
func TestCallCtxDeadlineWithoutDone(t *testing.T) {
	c := newCallCtx(context.Background(), time.Millisecond)
	release := c.release
	defer release()
	dl, ok := c.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	for time.Now().Before(dl) {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
	waitDone(t, c.Done())
}

func TestCallCtxParentCancel(t *testing.T) {
	for _, armed := range []bool{false, true} {
		parent, cancel := context.WithCancel(context.Background())
		c := newCallCtx(parent, time.Hour)
		release := c.release
		var done <-chan struct{}
		if armed {
			done = c.Done()
		}
		cancel()
		if armed {
			waitDone(t, done)
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("armed %v: Err = %v, want Canceled", armed, c.Err())
		}
		waitDone(t, c.Done())
		release()
	}
}

func TestCallCtxEarlierParentDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newCallCtx(parent, time.Hour)
	release := c.release
	defer release()
	pd, _ := parent.Deadline()
	if d, _ := c.Deadline(); !d.Equal(pd) {
		t.Fatalf("deadline %v, want the parent's %v", d, pd)
	}
}

// release ends the context and stops what Done armed; a context derived
// from it with the standard library follows.
func TestCallCtxRelease(t *testing.T) {
	c := newCallCtx(context.Background(), time.Hour)
	release := c.release
	child, cancel := context.WithCancel(c)
	defer cancel()
	release()
	waitDone(t, c.Done())
	waitDone(t, child.Done())
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("Err = %v / %v, want Canceled", c.Err(), child.Err())
	}
	release() // idempotent
}
