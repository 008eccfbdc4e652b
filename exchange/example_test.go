package exchange_test

import (
	"fmt"

	"github.com/minidubbo/minidubbo/exchange"
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
