// Package exchange turns frames into calls: the 16-byte header codec,
// request ids and pending futures, timeouts, heartbeats, synchronous and
// asynchronous calls over one multiplexed connection, and server-side
// dispatch with bounded concurrency.
//
// A Client sends requests built with NewFrame and waits for the response
// with the same id; every call ends exactly once, by its response, its
// deadline (status.ErrTimeout; a late response is dropped and counted by Late),
// the connection's death (status.ErrConnLost, found by heartbeats on idle
// connections) or Close (status.ErrClosed):
//
//	c, err := exchange.Dial(ctx, "127.0.0.1:20880", nil)
//	f := exchange.NewFrame()
//	f.B = append(f.B, body...)
//	resp, err := c.Call(ctx, time.Second, serialize.MsgpackID, f)
//	// use exchange.Body(resp), then resp.Release()
//
// A Server runs requests on a bounded pool of long-lived workers fed by a
// bounded queue. Overload is met with back-pressure, not errors: when the
// queue is full the server stops reading the connection whose request does
// not fit (TCP then makes the client's writes wait, and a client waits for
// room in its write queue rather than failing), and it keeps heartbeats
// going on such a paused connection so that neither side takes the other
// as dead. The same happens when the frames of all the server's
// connections hold its memory budget (Options.MaxMemory, 256 MiB by
// default): a connection whose next request does not fit is not read
// until memory is released (Server.Throttled), except that one holding
// nothing may still send a request of up to 4 KiB; meanwhile peers far
// behind in sending a request, or taking none of their answers, are
// closed to get memory back (Server.Reclaimed). status.ServerBusy
// answers only a limit set on purpose (Options.MaxConcurrent). Shutdown
// tells the clients that the server is
// going away (Client.ReadOnly), waits for the requests in progress until
// its context ends, then closes; handlers that ignore their context are
// abandoned and counted (Server.Abandoned), so Shutdown always returns.
//
// Non-OK responses come back as a *status.Error, which errors.Is matches
// against package status's sentinels (status.ErrTimeout, ...); the header's
// Status is a status.Code. This package declares no status or error names
// of its own besides ErrServerClosed.
package exchange
