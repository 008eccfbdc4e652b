// Package status is the vocabulary of call failures shared by every layer,
// as grpc-go's codes and status packages are: the status codes a response
// carries on the wire, the sentinel errors they stand for, the error a
// non-OK response becomes, and the one error type of every timeout.
//
// It imports no framework package, so transport, exchange, protocol,
// cluster, proxy and config all speak it without importing each other.
// Match failures with errors.Is against the sentinels (ErrTimeout,
// ErrConnLost, ...) and recover details with errors.As (*Error,
// *TimeoutError); wrappers keep the cause (they use %w, never %v), so the
// first reason a call failed is still in the chain when it reaches the
// caller.
package status

import (
	"errors"
	"fmt"
)

// Code is the status byte of a response header, with Dubbo's values.
type Code byte

// Status codes. OK through ServerBusy are Dubbo's; PayloadTooLarge and
// ReadOnly are minidubbo's additions.
const (
	OK              Code = 20
	ClientTimeout   Code = 30
	ServerTimeout   Code = 31
	BadRequest      Code = 40
	BadResponse     Code = 50
	ServiceNotFound Code = 60
	ServiceError    Code = 70
	ServerError     Code = 80
	ClientError     Code = 90
	ServerBusy      Code = 100
	// PayloadTooLarge answers a request whose response exceeded the
	// payload limit.
	PayloadTooLarge Code = 51
	// ReadOnly answers a request that reached a provider shutting down;
	// the request was not executed.
	ReadOnly Code = 101
)

// Sentinel errors. They fall in three classes, which the cluster layer uses
// to decide whether a call may be retried (see protocol.Retryable):
//
//   - not sent (ErrClosed, ErrDial, ErrReadOnly, ErrPayloadTooLarge on the
//     request side): the provider never saw the request;
//   - sent, no answer (ErrTimeout, ErrConnLost): the provider may have run
//     the method;
//   - answered (ErrServerBusy, ErrServiceNotFound, ErrBadRequest, ...): the
//     provider replied with a non-OK status.
var (
	// ErrClosed is returned for calls on a client or connection that is
	// closed, and for a call whose context ended while the first
	// connection to its provider was being dialled (protocol/dubbo: that
	// error also wraps the context's, and says so).
	ErrClosed = errors.New("connection closed")
	// ErrDial is wrapped by errors from dialling a provider.
	ErrDial = errors.New("dial failed")
	// ErrTimeout is matched by every timeout (*TimeoutError).
	ErrTimeout = errors.New("timed out")
	// ErrConnLost is returned for calls pending on a connection that died;
	// the reason it died (a frame over the limit, a peer that stopped
	// reading, silence) is wrapped with it.
	ErrConnLost = errors.New("connection lost")
	// ErrPayloadTooLarge is returned when a frame exceeds the payload limit.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrServerBusy is returned when the provider refused a call for load.
	ErrServerBusy = errors.New("server busy")
	// ErrServiceNotFound is returned for an unknown service or method.
	ErrServiceNotFound = errors.New("service not found")
	// ErrBadRequest is returned when the provider could not decode a request.
	ErrBadRequest = errors.New("bad request")
	// ErrBadResponse is returned when a response could not be decoded.
	ErrBadResponse = errors.New("bad response")
	// ErrServerError is returned for an internal provider error.
	ErrServerError = errors.New("server error")
	// ErrReadOnly is returned for calls to a provider that announced shutdown.
	ErrReadOnly = errors.New("provider is shutting down")
)

// codes is the one table between codes, names and sentinels.
var codes = []struct {
	code Code
	err  error
	name string
}{
	{ClientTimeout, ErrTimeout, "client timeout"},
	{ServerTimeout, ErrTimeout, "server timeout"},
	{BadRequest, ErrBadRequest, "bad request"},
	{BadResponse, ErrBadResponse, "bad response"},
	{PayloadTooLarge, ErrPayloadTooLarge, "payload too large"},
	{ServiceNotFound, ErrServiceNotFound, "service not found"},
	{ServiceError, ErrServerError, "service error"},
	{ServerError, ErrServerError, "server error"},
	{ClientError, ErrBadRequest, "client error"},
	{ServerBusy, ErrServerBusy, "server busy"},
	{ReadOnly, ErrReadOnly, "read only"},
}

// String returns the code's name, such as "service not found".
func (c Code) String() string {
	if c == OK {
		return "ok"
	}
	for _, e := range codes {
		if e.code == c {
			return e.name
		}
	}
	return fmt.Sprintf("status(%d)", byte(c))
}

// Err returns the sentinel error for c: nil for OK, ErrBadResponse for an
// unknown code.
func (c Code) Err() error {
	if c == OK {
		return nil
	}
	for _, e := range codes {
		if e.code == c {
			return e.err
		}
	}
	return ErrBadResponse
}

// CodeOf returns the code that answers err: OK for nil, the code of an
// *Error in err's chain, ServerTimeout for a timeout, else the code of the
// first sentinel err matches, else ServerError.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var se *Error
	if errors.As(err, &se) {
		return se.Code
	}
	if errors.Is(err, ErrTimeout) {
		return ServerTimeout
	}
	for _, e := range codes {
		if e.code != ServerTimeout && e.code != ClientTimeout && e.code != ClientError && e.code != ServiceError && errors.Is(err, e.err) {
			return e.code
		}
	}
	return ServerError
}

// Error is a non-OK response: its code and the provider's message.
// errors.Is matches it against the code's sentinel (Code.Err) and against
// its Cause.
type Error struct {
	Code    Code
	Message string
	// Cause, when set, is the error the provider answered Code for (a
	// context's deadline, a decoding error). It stays in the process that
	// made the Error: only Code and Message cross the wire.
	Cause error
}

// Error returns the provider's message, or the code's name when it is empty.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Message
}

// Unwrap returns the code's sentinel error and the Cause, when set.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Code.Err()}
	}
	return []error{e.Code.Err(), e.Cause}
}
