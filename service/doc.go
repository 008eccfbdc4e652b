// Package service is the contract side of user code: the rules by which a Go
// value becomes a service (its method table, built once by reflection), the
// call attachments carried in a context.Context, and the business errors that
// cross the wire with a code.
//
// It imports no other minidubbo package; every layer may import it.
package service
