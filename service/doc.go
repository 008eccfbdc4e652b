// Package service is the contract side of user code: the rules by which a Go
// value becomes a service (its method table, built once by reflection), the
// call attachments carried in a context.Context, and the business errors that
// cross the wire with a code.
//
// Byte slices cross a call without copies where they are large, so their
// ownership is part of the contract:
//
//   - A method owns its []byte arguments: the framework never reuses their
//     memory (one of 4 KiB or more is a slice of the request as it was
//     read, and that memory is the argument's from then on), so a method
//     may keep them.
//   - A []byte a method returns is sent after the method has returned,
//     from the method's own array when it is 4 KiB or more (protocol/dubbo
//     writes it to the network without copying it), so the method must
//     not modify it afterwards; keeping it to read is fine.
//   - A consumer owns the []byte replies it gets in the same way; the
//     arguments it passes are copied into the request before the call
//     sends it.
//
// It imports no other minidubbo package; every layer may import it.
package service
