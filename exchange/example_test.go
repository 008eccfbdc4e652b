package exchange_test

import (
	"context"
	"fmt"

	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/transport"
)

func ExampleHeader() {
	var b [exchange.HeaderSize]byte
	h := exchange.Header{Request: true, TwoWay: true, Serializer: 27, ID: 7, Length: 581}
	h.Put(b[:])
	fmt.Printf("% x\n", b)
	got, _ := exchange.ParseHeader(b[:])
	fmt.Println(got == h)
	// Output:
	// da bb db 00 00 00 00 00 00 00 00 07 00 00 02 45
	// true
}

// A handler that answers with bytes of the request itself, not a copy,
// sets KeepBody: the server then keeps the request's frame until the
// response has been written.
func ExampleRequest_keepBody() {
	echo := exchange.HandlerFunc(func(_ context.Context, req *exchange.Request) (*transport.Buffer, error) {
		f := exchange.NewFrame()
		f.Splice(req.Body) // sent from the request's own memory
		req.KeepBody = true
		return f, nil
	})
	req := &exchange.Request{Body: []byte("hello")}
	f, _ := echo.Handle(context.Background(), req)
	defer f.Release()
	fmt.Println(req.KeepBody, f.Len()-exchange.HeaderSize)
	// Output:
	// true 5
}
