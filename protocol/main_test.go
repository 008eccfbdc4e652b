package protocol_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Some tests start goroutines (sync.WaitGroup.Go): none may outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
