package dubbo

import (
	"context"
	"sync"
	"time"
)

// callCtx is the provider-side context of one call: its parent's values
// and cancellation, and a deadline. Unlike context.WithDeadline it arms
// nothing until someone asks for Done: most methods never do, and a call
// then costs one allocation instead of a timer, a child entry in the
// connection context (under that context's lock) and their removal. Err
// checks the deadline and the parent itself, so it is right either way.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	err   error
	timer *time.Timer
	stop  func() bool // stops the AfterFunc on parent
}

// newCallCtx returns the context of a call that must end by d from now;
// the caller ends it with release (a method call, not a CancelFunc: a
// method value would cost an allocation per call).
func newCallCtx(parent context.Context, d time.Duration) *callCtx {
	return newCallCtxUntil(parent, time.Now().Add(d))
}

// newCallCtxUntil is newCallCtx with a deadline instead of a duration.
func newCallCtxUntil(parent context.Context, deadline time.Time) *callCtx {
	c := &callCtx{}
	c.init(parent, deadline)
	return c
}

// init sets up a zero callCtx (one allocated with others, see call).
func (c *callCtx) init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
	if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callCtx) Value(key any) any { return c.parent.Value(key) }

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.check()
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	if c.parent.Done() != nil {
		c.stop = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
	}
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if err := c.check(); err != nil {
			c.end(err)
		}
	}
	return c.err
}

// check returns why the call's context is over, or nil. c.mu is held.
func (c *callCtx) check() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.end(err)
	}
}

// end records err and closes done if it was handed out. c.mu is held.
func (c *callCtx) end(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
}

// release ends the call's context (context.Canceled) and whatever Done
// armed.
func (c *callCtx) release() { c.cancel(context.Canceled) }

func (c *callCtx) String() string { return "dubbo.callCtx" }
