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
// It imports no other minidubbo package; every layer may import it.
package service
