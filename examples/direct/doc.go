// Package direct holds the direct-connect example: a provider and a
// consumer that find each other by address, with no registry.
//
//	go run ./examples/direct/provider -addr 127.0.0.1:20880
//	go run ./examples/direct/consumer -addr 127.0.0.1:20880 -name world
//
// The test of this package builds both programs and runs them as
// processes.
package direct
