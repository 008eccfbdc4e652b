package exchange

import "errors"

// Status is the status byte of a response header.
type Status byte

// Response statuses, with Dubbo's values.
const (
	StatusOK              Status = 20
	StatusClientTimeout   Status = 30
	StatusServerTimeout   Status = 31
	StatusBadRequest      Status = 40
	StatusBadResponse     Status = 50
	StatusServiceNotFound Status = 60
	StatusServiceError    Status = 70
	StatusServerError     Status = 80
	StatusClientError     Status = 90
	StatusServerBusy      Status = 100
	// StatusPayloadTooLarge (minidubbo's addition) answers a request whose
	// response exceeded the payload limit.
	StatusPayloadTooLarge Status = 51
	// StatusReadOnly (minidubbo's addition) answers a request that reached
	// a provider shutting down; the request was not executed.
	StatusReadOnly Status = 101
)

// Errors returned by the exchange layer. They fall in three classes, which
// the cluster layer uses to decide whether a call may be retried:
//
//   - not sent (ErrClosed, ErrDial, ErrPayloadTooLarge on the request side):
//     the provider never saw the request; always safe to retry;
//   - sent, no answer (ErrTimeout, ErrConnLost): the provider may have run
//     the method; failover retries these, so the method may run twice;
//   - answered (ErrServerBusy, ErrServiceNotFound, ErrBadRequest, ...): the
//     provider replied with a non-OK status. Only ErrServerBusy is retried.
var (
	// ErrClosed is returned for calls on a client or connection that is closed.
	ErrClosed = errors.New("exchange: connection closed")
	// ErrDial is wrapped by errors from dialling a provider.
	ErrDial = errors.New("exchange: dial failed")
	// ErrTimeout is returned when no response arrived before the deadline.
	ErrTimeout = errors.New("exchange: call timed out")
	// ErrConnLost is returned for calls pending on a connection that died.
	ErrConnLost = errors.New("exchange: connection lost")
	// ErrPayloadTooLarge is returned when a frame exceeds the payload limit.
	ErrPayloadTooLarge = errors.New("exchange: payload too large")
	// ErrServerBusy is returned when the provider's dispatch pool was full.
	ErrServerBusy = errors.New("exchange: server busy")
	// ErrServiceNotFound is returned for an unknown service or method.
	ErrServiceNotFound = errors.New("exchange: service not found")
	// ErrBadRequest is returned when the provider could not decode a request.
	ErrBadRequest = errors.New("exchange: bad request")
	// ErrBadResponse is returned when a response could not be decoded.
	ErrBadResponse = errors.New("exchange: bad response")
	// ErrServerError is returned for an internal provider error.
	ErrServerError = errors.New("exchange: server error")
	// ErrReadOnly is returned for calls to a provider that announced shutdown.
	ErrReadOnly = errors.New("exchange: provider is shutting down")
)
