package dubbo_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/service"
)

func Example() {
	p, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// Provider: any protocol.Invoker; port 0 picks a free port.
	hello := protocol.InvokerFunc{
		U: protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Greeter", nil),
		F: func(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
			name := inv.Args[0].(string)
			if name == "" {
				return nil, service.Errorf(service.CodeInvalidArgument, "empty name")
			}
			return &protocol.Result{Value: "hello " + name}, nil
		},
	}
	exp, err := p.Export(hello)
	if err != nil {
		panic(err)
	}

	// Consumer: refer the exported URL, which carries the real port.
	inv, err := p.Refer(exp.(*dubbo.Exporter).URL())
	if err != nil {
		panic(err)
	}
	defer inv.(io.Closer).Close()
	var reply string
	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "SayHello", Args: []any{"world"}, Reply: &reply})
	fmt.Println(reply, err)

	_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "SayHello", Args: []any{""}})
	var se *service.Error
	fmt.Println(errors.As(err, &se), se.Code, se.Message)
	// Output:
	// hello world <nil>
	// true invalid argument empty name
}
