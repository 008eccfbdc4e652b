// Package service is the contract side of user code: the rules by which a Go
// value becomes a service (its method table, built once by reflection), the
// call attachments carried in a context.Context, and the business errors that
// cross the wire with a code.
//
// Byte slices and ownership: a method owns its []byte arguments (they are
// copies nothing else uses, so it may keep them), and a consumer owns the
// []byte replies it gets. A []byte a method returns is sent after the
// method has returned, from the method's own array when it is 4 KiB or more
// (protocol/dubbo writes it to the network without copying it), so the
// method must not modify it afterwards; keeping it to read is fine.
//
// A method that does not need to keep a large argument may borrow it
// instead: a parameter of type Borrowed is passed as the bytes lie in the
// request the provider read, with no copy, and is valid only until the
// method returns (see Borrowed).
//
// With msgpack (the default serialization; others copy), a consumer's
// []byte or string argument of 4 KiB or more is written to the network
// from the caller's own memory (protocol/dubbo does not copy it
// into the request), so nothing may modify it while the call runs; it is
// the caller's again as soon as the call returns, however the call ends. A
// call that returns early (its timeout, its context cancelled, the
// connection lost, an error reply) first takes its request back: one
// still queued is withdrawn whole, never sent, and a connection that
// cannot write the rest at once copies it before it waits for the
// network. So the caller may reuse or overwrite the argument right after
// the call returns. (Synchronous calls; exchange.Client.Go, the futures'
// primitive, copies such bytes before it returns.)
//
// It imports no other minidubbo package; every layer may import it.
package service
