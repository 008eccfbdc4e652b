package protocol

import (
	"errors"

	"github.com/minidubbo/minidubbo/exchange"
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
	case errors.Is(err, exchange.ErrClosed), errors.Is(err, exchange.ErrDial),
		errors.Is(err, exchange.ErrTimeout), errors.Is(err, exchange.ErrConnLost),
		errors.Is(err, exchange.ErrServerBusy), errors.Is(err, exchange.ErrReadOnly):
		return true
	}
	return false
}
