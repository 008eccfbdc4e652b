// Package monitor counts calls on both sides of the wire (successes,
// failures, elapsed time, concurrency) per service, method and peer, and
// reports the counts asynchronously, never blocking a call.
package monitor
