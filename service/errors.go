package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Code is a business error code: what a provider method's error means to
// the application. It crosses the wire as an integer. Applications may
// use any value; codes below 100 are reserved for the framework.
type Code int32

// Well-known business error codes.
const (
	// CodeUnknown is used for a plain Go error returned by a provider method.
	CodeUnknown Code = 1
	// CodeInvalidArgument is a conventional code for a rejected argument.
	CodeInvalidArgument Code = 3
	// CodeNotFound is a conventional code for a missing entity.
	CodeNotFound Code = 5
	// CodePanic is used when a provider method panicked.
	CodePanic Code = 13
)

// String returns the name of a well-known code ("invalid argument"), or
// "code N" for any other.
func (c Code) String() string {
	switch c {
	case CodeUnknown:
		return "unknown"
	case CodeInvalidArgument:
		return "invalid argument"
	case CodeNotFound:
		return "not found"
	case CodePanic:
		return "panic"
	}
	return "code " + strconv.FormatInt(int64(c), 10)
}

// Error is a business error that crosses the wire as a code and a message.
//
// A provider method that returns an error whose chain holds an *Error sends
// that code and message to the caller; any other non-nil error is sent with
// CodeUnknown and err.Error() as the message. The message therefore reaches
// the client: do not put secrets in it.
//
// On the consumer, errors.As(err, &e) recovers the *Error, with Remote set.
type Error struct {
	Code    Code   `msgpack:"code" json:"code"`
	Message string `msgpack:"message" json:"message"`
	// Remote is true when the error was decoded from a provider's response.
	Remote bool `msgpack:"-" json:"-"`
}

// Errorf returns a new *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements the error interface.
func (e *Error) Error() string {
	code := strconv.FormatInt(int64(e.Code), 10)
	if name := e.Code.String(); name != "code "+code {
		code += ", " + name
	}
	if e.Remote {
		return "remote error (code " + code + "): " + e.Message
	}
	return "error (code " + code + "): " + e.Message
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
