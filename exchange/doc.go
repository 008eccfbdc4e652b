// Package exchange turns frames into calls: the 16-byte header codec,
// request ids and pending futures, timeouts, heartbeats, synchronous and
// asynchronous calls over one multiplexed connection, and server-side
// dispatch with bounded concurrency.
package exchange
