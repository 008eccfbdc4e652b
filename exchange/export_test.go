package exchange

import (
	"testing"
	"time"
)

// Timed returns how many calls wait in the client's deadline heap.
func (c *Client) Timed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timed)
}

// SetHeartbeatTicks makes the clients started until t ends take their
// heartbeat ticks from ticks.
func SetHeartbeatTicks(t testing.TB, ticks <-chan time.Time) {
	old := heartbeatTicks
	heartbeatTicks = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	t.Cleanup(func() { heartbeatTicks = old })
}

// LastRead returns when c last read a frame.
func LastRead(c *Client) time.Time { return c.conn.LastRead() }
