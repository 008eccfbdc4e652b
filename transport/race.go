//go:build race

package transport

import "sync/atomic"

// ioSync tells the race detector what a socket tells the program: a frame
// is written before it is read. The detector does not see through the
// kernel, so within one process (tests with both ends in it) everything a
// sender did before Send would otherwise look unordered with what the
// receiver does after reading the frame. Go's own poller does the same on
// Windows. Built only with -race.
var ioSync atomic.Uint64

// raceReleaseIO is called before frames are written.
func raceReleaseIO() { ioSync.Add(1) }

// raceAcquireIO is called after a frame is read.
func raceAcquireIO() { ioSync.Load() }
