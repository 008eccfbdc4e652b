package protocol

import (
	"errors"

	"github.com/minidubbo/minidubbo/status"
)

// Retryable reports whether a call that failed with err may be retried on
// another provider: the request was not sent (connection closed, dial
// failed), or it was sent and no answer came back (timeout, connection
// lost), or the provider answered that it was busy or shutting down. A
// business error or any other answer is never retryable.
//
// Retrying a call that was sent means the method may run twice.
func Retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, status.ErrClosed), errors.Is(err, status.ErrDial),
		errors.Is(err, status.ErrTimeout), errors.Is(err, status.ErrConnLost),
		errors.Is(err, status.ErrServerBusy), errors.Is(err, status.ErrReadOnly):
		return true
	}
	return false
}
