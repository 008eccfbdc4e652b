//go:build !unix

package dubbo_test

import "time"

// cpuTime is 0 where getrusage is missing: the benchmarks' cpu-µs/op
// then reads 0 rather than the build failing.
func cpuTime() time.Duration { return 0 }
