package exchange

import (
	"context"
	"sync/atomic"
	"time"
)

// A synchronous call that finds the connection's reading role free takes
// it: its caller reads the connection itself (transport's Resume) until
// its own response arrives, serving the other frames it reads on the way
// as the read loop would, instead of waiting for a reader goroutine to
// read the response and wake it. One caller at a time, the common case
// at one caller, is thus woken by the runtime's poller directly: no
// hand-off from a reader goroutine, and no second thread woken to run
// the caller while the reader parks.
//
// The role passes on so:
//   - The connection's own read loop holds it at first, and gives it up
//     (Detach) when it has answered the last call waiting: it is free.
//   - A synchronous call that finds it free (takeLead) holds it until
//     its call ends: its response, read by itself, ends the holding in
//     served; its deadline (expire) or its context (cancelLead) end the
//     call and stop its reading (transport's Interrupt) at once, also
//     within a frame (the next reader finishes that frame, within its
//     FrameTimeout), so that the call ends on time. It leaves the role
//     free when no other call waits, else it hands it to the standby
//     goroutine, which reads until no call waits, as the read loop did.
//   - An asynchronous call (Go) that finds it free hands it to the
//     standby goroutine: nothing of it waits to read.
//   - The standby goroutine takes a role left free for a whole
//     standbyTick, so that frames nobody waits for (heartbeats, the
//     provider's read-only event, the connection's end) are read within
//     two ticks, and a free role when the connection starts closing, so
//     that its end is read and Closed runs. While a caller reads for a
//     whole tick with no context to watch, it arms no timer (parked)
//     until handOn gives the role back.
//
// Only plain sockets (transport's Plain) do this; on others the read loop
// reads throughout.

// takeLead makes cl's caller the reader when the role is free and cl
// still waits (its request is written: a reader never waits for room to
// write, which could wait on a peer that waits for it to read).
func (c *Client) takeLead(ctx context.Context, cl *call, id uint64, d time.Duration, fromCtx bool) bool {
	if !c.canLead {
		return false
	}
	c.mu.Lock()
	ok := c.role == roleFree && c.pending[id] == cl
	if ok {
		c.role, c.leader = roleLeader, cl
		c.takes++
		if ctx.Done() != nil {
			// For the standby goroutine, which watches it (lead).
			cl.ctx, cl.d, cl.fromCtx = ctx, d, fromCtx
		}
	}
	c.mu.Unlock()
	return ok
}

// lead reads the connection until cl's call has ended (takeLead made its
// caller the reader), then takes the call's outcome from cl.done. A
// context cancelled while it reads is seen by the standby goroutine at
// its next tick (cancelCall): within standbyTick for a call that has been
// reading for a tick, within standbyTickMax for a call made among many
// short ones; a wait for it of its own (context.AfterFunc) would cost
// every call three allocations. Deadlines, the context's included, end
// the call on time (expire).
func (c *Client) lead(ctx context.Context, cl *call, id uint64, d time.Duration, fromCtx bool) {
	c.led.Add(1)
	done := ctx.Done()
	for {
		select {
		case <-done:
			c.cancelLead(ctx, cl, id, d, fromCtx) // ended already: do not wait for a tick
		default:
		}
		alive := c.conn.Resume()
		c.mu.Lock()
		if !alive || c.leader != cl {
			cl.ctx = nil // read by the standby goroutine under mu
			// The connection ended (Closed ran on this goroutine and
			// ended the role), or the response came (served handed the
			// role on).
			c.mu.Unlock()
			break
		}
		if c.pending[id] == cl {
			// Stopped while the call still waits: an Interrupt that was
			// meant for an earlier holder. Read on.
			c.mu.Unlock()
			continue
		}
		// The call ended by its deadline or its context, whose ending
		// stopped the reading.
		cl.ctx = nil
		c.leader = nil
		c.handOn()
		c.mu.Unlock()
		break
	}
	<-cl.done
}

// cancelCall is cancelLead for the standby goroutine, which knows the
// call and its id only: it does nothing if the call has ended (cl may
// be another call's by then, under another id).
func (c *Client) cancelCall(cl *call, id uint64) {
	c.mu.Lock()
	if c.pending[id] != cl {
		c.mu.Unlock()
		return
	}
	ctx, d, fromCtx := cl.ctx, cl.d, cl.fromCtx
	c.mu.Unlock()
	c.cancelLead(ctx, cl, id, d, fromCtx)
}

// cancelLead ends the call of a reading caller whose context ended, and
// stops its reading.
func (c *Client) cancelLead(ctx context.Context, cl *call, id uint64, d time.Duration, fromCtx bool) {
	c.mu.Lock()
	if c.pending[id] != cl {
		c.mu.Unlock()
		return
	}
	delete(c.pending, id)
	c.timed.drop(cl)
	if c.leader == cl {
		c.stopLeader()
	}
	c.mu.Unlock()
	cl.err = ctxError(ctx, ctxLeft(ctx, d, fromCtx))
	cl.finish()
}

// stopLeader stops the reading of the leader, whose call ended otherwise
// than by its response (c.mu held).
func (c *Client) stopLeader() {
	c.stops.Add(1)
	c.conn.Interrupt()
}

// served is called with c.mu held by the role's holder (in Serve) when it
// has answered cl, which it took out of pending: the reading caller of cl
// stops reading, and the read loop or the standby goroutine stops when no
// call waits any more.
func (c *Client) served(cl *call) {
	switch c.role {
	case roleLeader:
		if cl != c.leader {
			return
		}
		c.leader = nil
		c.conn.Detach()
		c.handOn()
	case roleLoop, roleStandby:
		if len(c.pending) > 0 || !c.canLead {
			return
		}
		c.conn.Detach()
		if c.role == roleLoop {
			c.wakeStandby() // it watches the free role from now on
		}
		c.role = roleFree
	}
}

// handOn gives up the reading role its holder stopped holding (c.mu
// held): free when no call waits, else to the standby goroutine.
func (c *Client) handOn() {
	parked := c.parked
	c.parked = false
	if len(c.pending) == 0 {
		c.role = roleFree
		if parked {
			// The standby goroutine stopped looking while the leader
			// read with no context to watch: it watches the free role
			// from now on.
			c.wakeStandby()
		}
		return
	}
	c.role = roleStandby
	c.wakeStandby()
}

// wakeReader hands a free role to the standby goroutine when calls wait:
// for an asynchronous call, whose caller does not read.
func (c *Client) wakeReader() {
	if !c.canLead {
		return
	}
	c.mu.Lock()
	if c.role == roleFree && len(c.pending) > 0 {
		c.role = roleStandby
		c.wakeStandby()
	}
	c.mu.Unlock()
}

func (c *Client) wakeStandby() {
	select {
	case c.standby <- struct{}{}:
	default:
	}
}

// standbyLoop is the standby goroutine: it reads when handed the role,
// and watches a role that callers take and give back, every tick (see
// standbyTick), taking it when it was left free for a whole tick or when
// the connection starts closing, and ending a reading call whose context
// ended. It returns once the connection has ended.
func (c *Client) standbyLoop() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	armed := false
	var seen uint64 // c.takes when the timer was armed
	idle := 0       // ticks the role has been free since a caller had it
	tick := standbyTick
	done := c.conn.Done()
	for {
		fired := false
		select {
		case <-c.standby:
		case <-t.C:
			armed, fired = false, true
		case <-done:
			done = nil
		}
		c.mu.Lock()
		read := false
		var cancel *call // a reading caller whose context may have ended
		var cancelID uint64
		var watch context.Context // cancel's context, asked after mu is let go
		active := c.takes != seen // callers took the role since the timer was armed
		if fired {
			if active {
				tick = min(2*tick, standbyTickMax) // callers come and go: look less often
			} else {
				tick = standbyTick // one caller reads for long (its context is watched), or none
			}
		}
		switch c.role {
		case roleEnded:
			c.mu.Unlock()
			return
		case roleStandby:
			read = true
		case roleLeader:
			l := c.leader
			if fired && l.ctx != nil {
				// Asked once mu is let go: Err may be the user's own code.
				cancel, cancelID, watch = l, l.id, l.ctx
			}
			if fired && !active && l.ctx == nil {
				// One caller reads for long with no context to watch
				// (its deadline is the expiry timer's): nothing to look
				// at until the role comes back, which wakes this
				// goroutine (handOn), so no timer meanwhile.
				c.parked = true
			}
		case roleFree:
			if active {
				idle = 0
			} else if fired {
				idle++
			}
			if done == nil || idle >= standbyIdleTicks {
				c.role = roleStandby
				read = true
			}
		}
		if !read && !armed && !c.parked && (c.role == roleFree || c.role == roleLeader) {
			seen = c.takes
			t.Reset(tick)
			armed = true
		}
		c.mu.Unlock()
		if cancel != nil && watch.Err() != nil {
			c.cancelCall(cancel, cancelID) // does nothing if the call has ended since
		}
		if !read {
			continue
		}
		if armed {
			t.Stop()
			armed = false
		}
		idle, tick = 0, standbyTick
		if h := testHookStandbyReads.Load(); h != nil {
			(*h)()
		}
		for {
			if !c.conn.Resume() {
				return // Closed ran: the role ended
			}
			c.mu.Lock()
			again := c.role == roleStandby // stopped by a stray Interrupt, or handed back
			c.mu.Unlock()
			if !again {
				break
			}
		}
		c.wakeStandby() // look at the role again: arm the timer
	}
}

// testHookStandbyReads, when set (tests), runs in the standby goroutine
// each time it is about to read the connection (the role handed to it or
// taken).
var testHookStandbyReads atomic.Pointer[func()]
