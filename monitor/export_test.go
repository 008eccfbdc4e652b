package monitor

// SetMaxKeys sets the bound on a Monitor's keys until the returned func
// restores it.
func SetMaxKeys(n int) (restore func()) {
	old := maxKeys
	maxKeys = n
	return func() { maxKeys = old }
}
