package monitor

import (
	"context"
	"errors"

	"github.com/minidubbo/minidubbo/service"
)

// ServiceName is the interface name of the monitor service in the registry:
// the monitor server exports a Collector under it, and every application
// that reports refers to it like to any other service.
const ServiceName = "org.minidubbo.monitor.MonitorService"

// CodeRefused is the business error code a Collector answers for a report
// it will never accept (an invalid report: too many rows, a name too long
// or not UTF-8, ...), whatever the number of tries. A Reporter drops such
// a report, counts it (ReporterStats.Refused) and goes on with the next,
// where any other error keeps the report for the next try. It is
// service.CodeInvalidArgument, so a reporter that does not know it only
// sees a business error, and retries as before.
const CodeRefused = service.CodeInvalidArgument

// Refused returns the error a Collector answers for a report it will never
// accept, saying why (err): a *service.Error with CodeRefused, which
// crosses the wire as that code and err's text. It returns nil for nil.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return &service.Error{Code: CodeRefused, Message: err.Error()}
}

// IsRefused reports whether err, returned by a Collect, says the report
// will never be accepted (see Refused), rather than that the monitor could
// not be reached or failed for now.
func IsRefused(err error) bool {
	var e *service.Error
	return errors.As(err, &e) && e.Code == CodeRefused
}

// Collector is the monitor service: it receives the reports of every
// application. Collect may be called again with a report it has already
// accepted (a retry after a lost answer); it must store that report once,
// recognising it by Application, Host and Seq. A report it will never
// accept it answers with Refused's error, so that the reporter drops it
// instead of sending it again.
type Collector interface {
	Collect(ctx context.Context, r *Report) error
}

// CollectorClient is the consumer stub of the monitor service, for
// config.Application.Refer (or proxy.Refer): after referring, Collect sends
// a report to the monitor.
type CollectorClient struct {
	Collect func(ctx context.Context, r *Report) error
}
