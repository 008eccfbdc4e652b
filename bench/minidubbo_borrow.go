//go:build !benchone || bench_minidubbo_borrow

package main

import (
	"context"
	"net"

	"github.com/minidubbo/minidubbo/service"
)

// minidubbo-borrow is minidubbo (the same consumer stack, the same
// provider configuration) with a provider method that borrows its
// argument (service.Borrowed): the argument is the request frame's own
// bytes, not a copy, and the reply is written from them.

func init() {
	register(system{name: "minidubbo-borrow", serve: dubboBorrowServe, dial: dubboDial})
}

// BorrowEchoService is the provider of minidubbo-borrow.
type BorrowEchoService struct{}

// Echo replies with its borrowed argument.
func (BorrowEchoService) Echo(_ context.Context, b service.Borrowed) ([]byte, error) { return b, nil }

func dubboBorrowServe(ln net.Listener) (string, string, error) {
	return dubboServeImpl(ln, BorrowEchoService{})
}
