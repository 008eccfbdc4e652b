package dubbo_test

import (
	"fmt"
	"time"

	"github.com/minidubbo/minidubbo/protocol/dubbo"
)

// Options tells the limits a Protocol runs with, its defaults filled in:
// here MaxMemory was given, and MaxMemoryPerIP (an eighth of it),
// MaxReplyMemory and MaxPayload are the defaults.
func ExampleProtocol_Options() {
	p, err := dubbo.New(&dubbo.Options{MaxMemory: 64 << 20, FrameTimeout: 2 * time.Second})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	o := p.Options()
	fmt.Println(o.MaxMemory>>20, o.MaxMemoryPerIP>>20, o.MaxReplyMemory>>20, o.MaxPayload>>20, o.FrameTimeout)
	// Output:
	// 64 8 256 8 2s
}
