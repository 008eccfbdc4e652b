// Package transport moves frames over TCP (optionally TLS): listen and dial,
// framing by the header's length, one writer per connection that coalesces
// queued frames into few syscalls, and a Close that is idempotent and waits
// for the goroutines it started.
package transport
