package service_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/service"
)

// A provider method returns a business error with a code; the consumer
// recovers it with errors.As, however the framework wrapped it, and may
// match the code alone with errors.Is. Codes below 100 are the
// framework's; an application's own start at 100.
func ExampleErrorf() {
	const CodeOutOfStock service.Code = 100
	// Provider side: what a method returns.
	err := fmt.Errorf("reserve: %w", service.Errorf(CodeOutOfStock, "item %d is out of stock", 42))

	// Consumer side: what the caller does with it.
	var se *service.Error
	if errors.As(err, &se) {
		fmt.Println(se.Code, "|", se.Message)
	}
	fmt.Println(errors.Is(err, &service.Error{Code: CodeOutOfStock}))
	fmt.Println(service.Errorf(service.CodeNotFound, "no order 7"))
	// A plain Go error reaches the caller as CodeUnknown with its text.
	fmt.Println(service.FromError(errors.New("disk full")))
	// Output:
	// code 100 | item 42 is out of stock
	// true
	// error (code 5, not found): no order 7
	// error (code 1, unknown): disk full
}

// Attachments are string pairs that travel with a call: the consumer
// adds them to the context it calls with, the provider method reads
// them from its own. They stop at the provider unless it passes them on
// with Propagate. NewIncomingContext stands in here for the framework,
// which calls it on the provider for each call it serves.
func ExamplePropagate() {
	// Consumer: what a call made with ctx sends.
	ctx := service.WithAttachment(context.Background(), "trace", "t-1")
	ctx = service.WithAttachment(ctx, "tenant", "acme")
	fmt.Println(service.AttachmentsFrom(ctx))

	// Provider: the method's context carries what came in.
	served := service.NewIncomingContext(context.Background(), service.AttachmentsFrom(ctx))
	tenant, ok := service.Attachment(served, "tenant")
	fmt.Println(tenant, ok)
	// Its own calls send nothing of it, unless it says which to pass on.
	fmt.Println(len(service.AttachmentsFrom(served)))
	onward := service.Propagate(served, "trace")
	fmt.Println(service.AttachmentsFrom(onward))
	// Output:
	// map[tenant:acme trace:t-1]
	// acme true
	// 0
	// map[trace:t-1]
}
