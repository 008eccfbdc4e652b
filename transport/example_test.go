package transport_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/transport"
)

// upper answers every frame with its body in upper case.
type upper struct{}

func (upper) Serve(c *transport.Conn, f *transport.Buffer) {
	body := strings.ToUpper(string(f.B[transport.HeaderSize:]))
	f.Release() // the handler owns what it is served
	_ = c.Send(newFrame(body))
}
func (upper) Closed(*transport.Conn, error) {}

// received hands the frames a client gets to the code that waits for them.
type received chan string

func (r received) Serve(_ *transport.Conn, f *transport.Buffer) {
	r <- string(f.B[transport.HeaderSize:])
	f.Release()
}
func (received) Closed(*transport.Conn, error) {}

// newFrame is a frame with the magic, the body's length and the body; the
// header's other bytes belong to the exchange layer (zero here).
func newFrame(body string) *transport.Buffer {
	f := transport.GetBuffer()
	var h [transport.HeaderSize]byte
	binary.BigEndian.PutUint16(h[0:2], transport.Magic)
	binary.BigEndian.PutUint32(h[12:16], uint32(len(body)))
	f.B = append(append(f.B, h[:]...), body...)
	return f
}

// A server and a client on loopback exchanging frames: what the exchange
// layer builds calls on.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := transport.NewServer(upper{}, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	got := make(received, 2)
	c, err := transport.Dial(ctx, l.Addr().String(), got, nil)
	if err != nil {
		panic(err)
	}
	for _, body := range []string{"hello", "frames"} {
		if err := c.Send(newFrame(body)); err != nil { // Send owns the frame
			panic(err)
		}
	}
	fmt.Println(<-got, <-got)

	_ = c.Close()
	_ = srv.Close()
	fmt.Println(errors.Is(<-served, transport.ErrServerClosed))
	// Output:
	// HELLO FRAMES
	// true
}

// Two servers of one process share a memory budget: the frames of both
// servers' connections count against one limit, and each server counts
// the times it stopped reading a connection for room (Throttled) and the
// connections its budget closed to get memory back (Reclaimed).
func ExampleBudget() {
	budget := transport.NewBudget(64 << 20)
	opts := &transport.Options{Budget: budget, MaxPayload: 1 << 20}
	a := transport.NewServer(upper{}, opts)
	b := transport.NewServer(upper{}, opts)
	fmt.Println(a.Budget() == budget, b.Budget() == budget, budget.Limit()>>20, "MiB")
	fmt.Println("held:", budget.Used(), "throttled:", a.Throttled()+b.Throttled(), "reclaimed:", budget.Reclaimed())

	// Without a shared Budget, each server has its own of MaxMemory bytes
	// (by default 256 MiB, or twice MaxPayload when more).
	fmt.Println(transport.NewServer(upper{}, nil).Budget().Limit()>>20, "MiB")
	// Output:
	// true true 64 MiB
	// held: 0 throttled: 0 reclaimed: 0
	// 256 MiB
}

// The frames in progress (their bodies still arriving) of a server's
// connections from one IP address may hold at most MaxMemoryPerIP of its
// memory budget, by default an eighth of it: peers that declare large
// frames and send little hold no more than that per address. A frame
// that would go over waits unread, counted by ThrottledByIP.
func ExampleOptions_maxMemoryPerIP() {
	srv := transport.NewServer(upper{}, &transport.Options{MaxMemory: 64 << 20, MaxMemoryPerIP: 4 << 20})
	fmt.Println(srv.Budget().Limit()>>20, "MiB, held back by address:", srv.ThrottledByIP())
	fmt.Println("by default", transport.DefaultMaxMemoryPerIP>>20, "MiB per address of", transport.DefaultMaxMemory>>20, "MiB")
	// Output:
	// 64 MiB, held back by address: 0
	// by default 32 MiB per address of 256 MiB
}
