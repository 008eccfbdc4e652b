package transport_test

import (
	"fmt"
	"net"

	"github.com/minidubbo/minidubbo/transport"
)

// Queued is what waits to be written: here to a peer (the other end of
// net.Pipe) that reads nothing.
func ExampleConn_Queued() {
	local, peer := net.Pipe()
	c := transport.NewConn(local, make(received, 1), nil)
	fmt.Println(c.Queued())
	_ = c.Send(newFrame("hello"))
	fmt.Println(c.Queued() > 0)
	peer.Close()
	c.Close()
	// Output:
	// 0
	// true
}
