package monitor

import "context"

// ServiceName is the interface name of the monitor service in the registry:
// the monitor server exports a Collector under it, and every application
// that reports refers to it like to any other service.
const ServiceName = "org.minidubbo.monitor.MonitorService"

// Collector is the monitor service: it receives the reports of every
// application. Collect may be called again with a report it has already
// accepted (a retry after a lost answer); it must store that report once,
// recognising it by Application, Host and Seq.
type Collector interface {
	Collect(ctx context.Context, r *Report) error
}

// CollectorClient is the consumer stub of the monitor service, for
// config.Application.Refer (or proxy.Refer): after referring, Collect sends
// a report to the monitor.
type CollectorClient struct {
	Collect func(ctx context.Context, r *Report) error
}
