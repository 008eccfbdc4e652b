// Package transport moves frames over TCP (optionally TLS): listen and dial,
// framing by the header's length, one writer per connection that coalesces
// queued frames into few syscalls, and a Close that is idempotent and waits
// for the goroutines it started.
//
// A frame is a HeaderSize-byte header that starts with Magic and ends with
// the big-endian body length, then the body; the rest of the header belongs
// to the exchange layer. A frame with another magic, or declaring a body
// over Options.MaxPayload, closes its connection before anything is
// allocated for the body.
//
// The exchange layer implements Handler and owns the protocol:
//
//	srv := transport.NewServer(handler, &transport.Options{MaxPayload: 8 << 20})
//	l, _ := transport.Listen("127.0.0.1:0")
//	go srv.Serve(l)
//	defer srv.Close()
//
//	c, _ := transport.Dial(ctx, l.Addr().String(), clientHandler, nil)
//	c.Send(frame) // a *Buffer; Send takes ownership
//	defer c.Close()
//
// Frame buffers come from a pool (GetBuffer, Buffer.Release); whoever holds
// a buffer releases it once. A Server charges the frames its connections
// read and queue to a memory budget (Options.MaxMemory, Budget) until they
// are released, and stops reading connections while it is used up, so a
// frame that is never released holds its part of the budget for good.
package transport
