package status_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/status"
)

func TestCodeTable(t *testing.T) {
	for _, c := range []struct {
		code status.Code
		err  error
	}{
		{status.ClientTimeout, status.ErrTimeout},
		{status.ServerTimeout, status.ErrTimeout},
		{status.BadRequest, status.ErrBadRequest},
		{status.BadResponse, status.ErrBadResponse},
		{status.PayloadTooLarge, status.ErrPayloadTooLarge},
		{status.ServiceNotFound, status.ErrServiceNotFound},
		{status.ServiceError, status.ErrServerError},
		{status.ServerError, status.ErrServerError},
		{status.ClientError, status.ErrBadRequest},
		{status.ServerBusy, status.ErrServerBusy},
		{status.ReadOnly, status.ErrReadOnly},
	} {
		require.Equal(t, c.err, c.code.Err(), c.code.String())
		se := &status.Error{Code: c.code, Message: "m"}
		require.ErrorIs(t, se, c.err)
		if c.code != status.ClientTimeout {
			require.Equal(t, c.code, status.CodeOf(se))
		}
		require.NotContains(t, c.code.String(), "status(")
	}
	require.NoError(t, status.OK.Err())
	require.Equal(t, status.OK, status.CodeOf(nil))
	require.ErrorIs(t, status.Code(99).Err(), status.ErrBadResponse)
	require.Equal(t, "status(99)", status.Code(99).String())
	require.Equal(t, status.ServiceNotFound, status.CodeOf(fmt.Errorf("x: %w", status.ErrServiceNotFound)))
	require.Equal(t, status.ServerError, status.CodeOf(errors.New("plain")))
	require.Equal(t, "server busy", (&status.Error{Code: status.ServerBusy}).Error())
	// A timeout, whichever way it is spelled, is answered as one.
	require.Equal(t, status.ServerTimeout, status.CodeOf(&status.TimeoutError{}))
	require.Equal(t, status.ServerTimeout, status.CodeOf(fmt.Errorf("x: %w", status.ErrTimeout)))
}

// An Error keeps the cause it was made for: errors.Is finds both the
// code's sentinel and the cause, and CodeOf still reads the code.
func TestErrorKeepsItsCause(t *testing.T) {
	se := &status.Error{Code: status.ServerTimeout, Message: "m", Cause: context.DeadlineExceeded}
	err := fmt.Errorf("wrapped: %w", se)
	require.ErrorIs(t, err, status.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)
	require.Equal(t, status.ServerTimeout, status.CodeOf(err))
	require.EqualError(t, err, "wrapped: m")
	require.NotErrorIs(t, &status.Error{Code: status.BadRequest}, context.DeadlineExceeded)
}

func TestTimeoutError(t *testing.T) {
	for _, c := range []struct {
		err  *status.TimeoutError
		want string
	}{
		{&status.TimeoutError{Service: "shop.Inventory", Method: "Get", Addr: "127.0.0.1:20880", Timeout: time.Second,
			Source: status.SourceReference, Side: status.Consumer},
			"shop.Inventory.Get timed out after 1s on the consumer calling 127.0.0.1:20880 (reference timeout)"},
		{&status.TimeoutError{Service: "shop.Inventory", Method: "Get", Addr: "127.0.0.1:20880", Timeout: 250 * time.Millisecond,
			Source: status.SourceContext, Side: status.Provider},
			"shop.Inventory.Get timed out after 250ms on the provider 127.0.0.1:20880 (context deadline)"},
		{&status.TimeoutError{Method: "Get", Timeout: 2 * time.Second, Source: status.SourceMethod, Side: status.Consumer},
			"Get timed out after 2s on the consumer (method timeout)"},
		{&status.TimeoutError{Timeout: time.Second, Source: status.SourceProvider, Side: status.Consumer},
			"call timed out after 1s on the consumer (provider's advertised timeout)"},
		{&status.TimeoutError{Timeout: time.Second, Source: status.SourceDefault, Side: status.Consumer},
			"call timed out after 1s on the consumer (default timeout)"},
		{&status.TimeoutError{}, "call timed out after 0s on the unknown side (unknown setting)"},
	} {
		require.EqualError(t, c.err, c.want)
		wrapped := fmt.Errorf("cluster: failover x.m: %w", c.err)
		require.ErrorIs(t, wrapped, status.ErrTimeout)
		require.ErrorIs(t, wrapped, context.DeadlineExceeded)
		require.NotErrorIs(t, wrapped, context.Canceled)
		var te *status.TimeoutError
		require.ErrorAs(t, wrapped, &te)
		require.Same(t, c.err, te)
	}
}

func ExampleError() {
	var err error = &status.Error{Code: status.ServiceNotFound, Message: "dubbo: no service demo.Nope"}
	fmt.Println(errors.Is(err, status.ErrServiceNotFound), status.CodeOf(err))
	// Output: true service not found
}

func ExampleTimeoutError() {
	err := fmt.Errorf("cluster: failfast: %w", &status.TimeoutError{
		Service: "shop.Inventory", Method: "Get", Timeout: 2 * time.Second,
		Source: status.SourceMethod, Side: status.Provider,
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, status.ErrTimeout))
	// Output:
	// cluster: failfast: shop.Inventory.Get timed out after 2s on the provider (method timeout)
	// true true
}
