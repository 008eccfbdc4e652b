package dubbo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOptionsAreTheBudgets: the memory limits Options reports are the
// limits of the budgets the Protocol charges, not a second reckoning.
func TestOptionsAreTheBudgets(t *testing.T) {
	for _, in := range []*Options{nil, {MaxMemory: 64 << 20, MaxReplyMemory: 16 << 20}, {MaxPayload: 200 << 20}} {
		p, err := New(in)
		require.NoError(t, err)
		o := p.Options()
		require.Equal(t, p.budget.Limit(), o.MaxMemory)
		require.Equal(t, p.replies.Limit(), o.MaxReplyMemory)
		require.NoError(t, p.Close())
	}
}
