package exchange

import (
	"errors"
	"fmt"
)

// statuses maps every status but StatusOK to its sentinel error: the one
// table between the status byte and the errors of this package.
var statuses = []struct {
	status Status
	err    error
	name   string
}{
	{StatusClientTimeout, ErrTimeout, "client timeout"},
	{StatusServerTimeout, ErrTimeout, "server timeout"},
	{StatusBadRequest, ErrBadRequest, "bad request"},
	{StatusBadResponse, ErrBadResponse, "bad response"},
	{StatusPayloadTooLarge, ErrPayloadTooLarge, "payload too large"},
	{StatusServiceNotFound, ErrServiceNotFound, "service not found"},
	{StatusServiceError, ErrServerError, "service error"},
	{StatusServerError, ErrServerError, "server error"},
	{StatusClientError, ErrBadRequest, "client error"},
	{StatusServerBusy, ErrServerBusy, "server busy"},
	{StatusReadOnly, ErrReadOnly, "read only"},
}

// String returns the status name, such as "service not found".
func (s Status) String() string {
	if s == StatusOK {
		return "ok"
	}
	for _, e := range statuses {
		if e.status == s {
			return e.name
		}
	}
	return fmt.Sprintf("status(%d)", byte(s))
}

// Err returns the sentinel error for s, nil for StatusOK, and
// ErrBadResponse for an unknown status.
func (s Status) Err() error {
	if s == StatusOK {
		return nil
	}
	for _, e := range statuses {
		if e.status == s {
			return e.err
		}
	}
	return ErrBadResponse
}

// StatusOf returns the status that answers err: StatusOK for nil, the
// status of the first sentinel of this package in err's chain, else
// StatusServerError.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	for _, e := range statuses {
		if e.status != StatusServerTimeout && e.status != StatusClientError && e.status != StatusServiceError && errors.Is(err, e.err) {
			return e.status
		}
	}
	return StatusServerError
}

// StatusError is a non-OK response: its status and the provider's message.
// errors.Is matches it against the status's sentinel (Status.Err).
type StatusError struct {
	Status  Status
	Message string
}

// Error returns the provider's message, or the status name when it is empty.
func (e *StatusError) Error() string {
	if e.Message == "" {
		return "exchange: " + e.Status.String()
	}
	return e.Message
}

// Unwrap returns the status's sentinel error.
func (e *StatusError) Unwrap() error { return e.Status.Err() }
