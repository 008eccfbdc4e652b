package monitor

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock in nanoseconds. A counted call
// reads the clock twice on each of up to three filters; time.Now reads the
// wall clock too, which doubles the cost where reading a clock is slow (on
// the virtual machine the README's figures come from, the clock reads were
// the largest part of counting). runtime.nanotime is a linkname the Go
// runtime keeps for the packages that use it.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
