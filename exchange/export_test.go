package exchange

// Timed returns how many calls wait in the client's deadline heap.
func (c *Client) Timed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timed)
}
