// Package chaossvc is the service of the chaos harness: a call carries a
// request id, the provider records the id in its ledger before it answers,
// and the answer names the provider.
package chaossvc

import (
	"context"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/examples/chaos/ledger"
)

// Logger returns the logger of the harness's programs: warnings and above
// to stderr when verbose (their -v flag), nothing otherwise.
func Logger(verbose bool) (*zap.Logger, error) {
	if !verbose {
		return zap.NewNop(), nil
	}
	zc := zap.NewDevelopmentConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	return zc.Build()
}

// Interface is the service's name in the registry.
const Interface = "demo.chaos.Ledger"

// Reply names the provider that executed a call.
type Reply struct {
	Provider string `msgpack:"provider"`
}

// Client is the consumer stub.
type Client struct {
	Call func(ctx context.Context, id string) (*Reply, error)
}

// Service is the provider: each call is written to the ledger, then
// answered.
type Service struct {
	Name   string
	Ledger *ledger.Provider
}

// Call records id as executed and answers with the provider's name.
func (s *Service) Call(_ context.Context, id string) (*Reply, error) {
	if err := s.Ledger.Executed(id); err != nil {
		return nil, err
	}
	return &Reply{Provider: s.Name}, nil
}
