package transport

import "net"

// HasDirectWrite reports whether a Conn on nc would write it with raw
// writes (directWrite) rather than through net.Conn.
func HasDirectWrite(nc net.Conn) bool { return newDirectWrite(nc) != nil }
