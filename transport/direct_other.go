//go:build !unix

package transport

import (
	"net"
	"sync/atomic"
)

// directWrite is SendNow's write where there is none: SendNow is Send.
type directWrite struct {
	beforeWait func(rest [][]byte) // unused: see waitHook
	sent       atomic.Uint64       // unused: newDirectWrite returns nil
}

func newDirectWrite(net.Conn) *directWrite { return nil }

func (*directWrite) write([]byte) (int, error) { return 0, nil }

func (*directWrite) writev([]*Buffer) (int, error) { return 0, nil }

func (*directWrite) writeBufs([][]byte) (int, error) { return 0, nil }
