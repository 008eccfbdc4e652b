package service_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/proxy"
	"github.com/minidubbo/minidubbo/service"
)

// Blobs reads large arguments without keeping them.
type Blobs struct{}

// Digest borrows its argument: it reads it and keeps nothing of it.
func (Blobs) Digest(_ context.Context, data service.Borrowed) (string, error) {
	return fmt.Sprintf("%x", sha256.Sum256(data))[:16], nil
}

// Echo returns its borrowed argument: the provider writes the reply
// before the request's buffer is reused.
func (Blobs) Echo(_ context.Context, data service.Borrowed) ([]byte, error) {
	return data, nil
}

// A method borrows a []byte argument by declaring it service.Borrowed;
// consumers send a []byte as usual.
func ExampleBorrowed() {
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	prov, err := proxy.NewProvider(protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Blobs", nil), Blobs{})
	if err != nil {
		panic(err)
	}
	exp, err := p.Export(prov)
	if err != nil {
		panic(err)
	}
	inv, err := p.Refer(exp.URL())
	if err != nil {
		panic(err)
	}
	defer inv.(io.Closer).Close()

	data := bytes.Repeat([]byte("minidubbo "), 2000) // 20,000 bytes
	var digest string
	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "Digest", Args: []any{data}, Reply: &digest})
	fmt.Println(digest, err)
	var echo []byte
	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "Echo", Args: []any{data}, Reply: &echo})
	fmt.Println(len(echo), bytes.Equal(echo, data), err)
	// Output:
	// d07abe1626ae1271 <nil>
	// 20000 true <nil>
}
