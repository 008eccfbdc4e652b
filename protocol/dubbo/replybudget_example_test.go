package dubbo_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
)

// A consumer bounds the replies in progress on all its connections
// together with MaxReplyMemory: a reply over 4 KiB is charged while its
// body is read, and given back once it is (here, 64 KiB charged and given
// back; the 2-byte reply is never charged).
func ExampleOptions_maxReplyMemory() {
	provider, err := dubbo.New(nil)
	if err != nil {
		panic(err)
	}
	defer provider.Close()
	big := protocol.InvokerFunc{
		U: protocol.NewURL("dubbo", "127.0.0.1", 0, "demo.Files", nil),
		F: func(ctx context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
			n, err := strconv.Atoi(inv.Args[0].(string))
			if err != nil {
				return nil, err
			}
			return &protocol.Result{Value: strings.Repeat("x", n)}, nil
		},
	}
	exp, err := provider.Export(big)
	if err != nil {
		panic(err)
	}

	consumer, err := dubbo.New(&dubbo.Options{MaxReplyMemory: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	inv, err := consumer.Refer(exp.(*dubbo.Exporter).URL())
	if err != nil {
		panic(err)
	}
	defer inv.(io.Closer).Close()
	for _, n := range []int{2, 64 << 10} {
		var reply string
		_, err = inv.Invoke(context.Background(), &protocol.Invocation{Method: "Read", Args: []any{strconv.Itoa(n)}, Reply: &reply})
		st := consumer.Stats()
		fmt.Println(len(reply), err, st.ReplyMemoryHeld, st.ReplyThrottled)
	}
	// Output:
	// 2 <nil> 0 0
	// 65536 <nil> 0 0
}
