// Package exchange turns frames into calls: the 16-byte header codec,
// request ids and pending futures, timeouts, heartbeats, synchronous and
// asynchronous calls over one multiplexed connection, and server-side
// dispatch with bounded concurrency.
//
// A Client sends requests built with NewFrame and waits for the response
// with the same id; every call ends exactly once, by its response, its
// deadline (ErrTimeout; a late response is dropped and counted by Late),
// the connection's death (ErrConnLost, found by heartbeats on idle
// connections) or Close (ErrClosed):
//
//	c, err := exchange.Dial(ctx, "127.0.0.1:20880", nil)
//	f := exchange.NewFrame()
//	f.B = append(f.B, body...)
//	resp, err := c.Call(ctx, time.Second, serialize.MsgpackID, f)
//	// use exchange.Body(resp), then resp.Release()
//
// A Server runs a Handler for each request, at most Options.MaxConcurrent
// at once, and answers StatusServerBusy beyond that. Shutdown tells the
// clients that the server is going away (Client.ReadOnly), waits for the
// requests in progress, then closes.
//
// Non-OK responses come back as *StatusError, which errors.Is matches
// against the sentinel errors of this package (Status.Err, StatusOf).
package exchange
