package filter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/filter"
	"github.com/minidubbo/minidubbo/status"
)

// echoAtt answers with the token attachment the call carried.
var echoAtt = protocol.InvokerFunc{F: func(_ context.Context, inv *protocol.Invocation) (*protocol.Result, error) {
	return &protocol.Result{Value: inv.Attachment(protocol.KeyToken)}, nil
}}

// TokenAttach adds the token without touching the caller's map.
func TestTokenAttach(t *testing.T) {
	ctx := t.Context()
	attach := protocol.Chain(echoAtt, filter.NewTokenAttach("s3cret"))
	atts := map[string]string{"k": "v"}
	res, err := attach.Invoke(ctx, &protocol.Invocation{Service: "S", Method: "m", Attachments: atts})
	if err != nil || res.Value != "s3cret" {
		t.Fatalf("attach: %v %v", res, err)
	}
	if len(atts) != 1 {
		t.Fatalf("caller's attachments changed: %v", atts)
	}
}

func TestExecutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	started, release := make(chan struct{}), make(chan struct{})
	slow := protocol.InvokerFunc{F: func(context.Context, *protocol.Invocation) (*protocol.Result, error) {
		started <- struct{}{}
		<-release
		return &protocol.Result{}, nil
	}}
	inv := protocol.Chain(slow, filter.NewExecutes(1))
	done := make(chan error, 1)
	go func() { _, err := inv.Invoke(ctx, &protocol.Invocation{Method: "m"}); done <- err }()
	<-started
	if _, err := inv.Invoke(ctx, &protocol.Invocation{Method: "m"}); !errors.Is(err, status.ErrServerBusy) {
		t.Fatalf("second call: %v, want server busy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
