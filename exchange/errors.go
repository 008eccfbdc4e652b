package exchange

import "github.com/minidubbo/minidubbo/status"

// Status is the status byte of a response header (package status's Code).
type Status = status.Code

// Response statuses: the values of package status, under this package's
// names for the header codec.
const (
	StatusOK              = status.OK
	StatusClientTimeout   = status.ClientTimeout
	StatusServerTimeout   = status.ServerTimeout
	StatusBadRequest      = status.BadRequest
	StatusBadResponse     = status.BadResponse
	StatusServiceNotFound = status.ServiceNotFound
	StatusServiceError    = status.ServiceError
	StatusServerError     = status.ServerError
	StatusClientError     = status.ClientError
	StatusServerBusy      = status.ServerBusy
	StatusPayloadTooLarge = status.PayloadTooLarge
	StatusReadOnly        = status.ReadOnly
)

// The errors of this layer are package status's sentinels; these names
// are the same values, kept so that code written against exchange reads
// on. New code should match against package status.
var (
	ErrClosed          = status.ErrClosed
	ErrDial            = status.ErrDial
	ErrTimeout         = status.ErrTimeout
	ErrConnLost        = status.ErrConnLost
	ErrPayloadTooLarge = status.ErrPayloadTooLarge
	ErrServerBusy      = status.ErrServerBusy
	ErrServiceNotFound = status.ErrServiceNotFound
	ErrBadRequest      = status.ErrBadRequest
	ErrBadResponse     = status.ErrBadResponse
	ErrServerError     = status.ErrServerError
	ErrReadOnly        = status.ErrReadOnly
)

// StatusError is a non-OK response (package status's Error).
type StatusError = status.Error

// StatusOf returns the status that answers err (status.CodeOf).
func StatusOf(err error) Status { return status.CodeOf(err) }
