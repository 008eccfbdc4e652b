package transport

// WriterWrites returns how many writes c's writer goroutine made.
func WriterWrites(c *Conn) uint64 { return c.writerWrites.Load() }
