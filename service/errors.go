package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Well-known business error codes. Applications may use any other code;
// codes below 100 are reserved for the framework.
const (
	// CodeUnknown is used for a plain Go error returned by a provider method.
	CodeUnknown int32 = 1
	// CodeInvalidArgument is a conventional code for a rejected argument.
	CodeInvalidArgument int32 = 3
	// CodeNotFound is a conventional code for a missing entity.
	CodeNotFound int32 = 5
	// CodePanic is used when a provider method panicked.
	CodePanic int32 = 13
)

// Error is a business error that crosses the wire as a code and a message.
//
// A provider method that returns an error whose chain holds an *Error sends
// that code and message to the caller; any other non-nil error is sent with
// CodeUnknown and err.Error() as the message. The message therefore reaches
// the client: do not put secrets in it.
//
// On the consumer, errors.As(err, &e) recovers the *Error, with Remote set.
type Error struct {
	Code    int32  `msgpack:"code" json:"code"`
	Message string `msgpack:"message" json:"message"`
	// Remote is true when the error was decoded from a provider's response.
	Remote bool `msgpack:"-" json:"-"`
}

// Errorf returns a new *Error with the given code and formatted message.
func Errorf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Remote {
		return fmt.Sprintf("remote error (code %d): %s", e.Code, e.Message)
	}
	return fmt.Sprintf("error (code %d): %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &service.Error{Code: 5}) matches on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// FromError returns the business error to send for err: the *Error in err's
// chain, or a new one with CodeUnknown and err.Error(). It returns nil for nil.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return &Error{Code: e.Code, Message: e.Message}
	}
	return &Error{Code: CodeUnknown, Message: err.Error()}
}

// Panicked returns the error a caller gets when the provider method
// iface.method panicked: CodePanic, naming the method and a new incident id
// (also returned) under which the provider logs the panic value and stack.
// The panic value itself never reaches the caller: it may hold secrets or
// internals.
func Panicked(iface, method string) (*Error, string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return &Error{Code: CodePanic, Message: fmt.Sprintf(
		"%s.%s failed on the provider (server error, incident %s: see the provider's log)", iface, method, id)}, id
}
