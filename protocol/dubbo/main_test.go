package dubbo_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(providerEnv) == "1" {
		os.Exit(runBenchProvider())
	}
	if os.Getenv(memProviderEnv) == "1" {
		os.Exit(runMemProvider())
	}
	goleak.VerifyTestMain(m)
}
