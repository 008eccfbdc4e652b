// Package chaos holds the fault harness behind `make chaos`: a provider
// and a consumer program (configured by YAML through the config package,
// as a user would) and, in this package's test, a driver that builds them,
// runs three providers and two consumers under steady load against a real
// ZooKeeper, injects one fault per scenario and prints a table of calls,
// failed, lost and duplicated calls and recovery time, from ledgers of
// request ids both sides keep (package ledger).
//
//	make chaos                                   # every scenario, under 10 minutes
//	go test -run TestChaos ./examples/chaos/     # the quick subset (CI)
//	go test -run TestChaos ./examples/chaos/ -chaos.full -chaos.only zk -v
//
// Scenarios: provider SIGKILL, SIGSTOP for 10 s, SIGTERM, restart on the
// same port, SIGKILL while ZooKeeper is down; ZooKeeper down 30 s,
// restarted with its data wiped, session expiry forced by a partition,
// ensemble leader then follower killed; every provider node deleted (the
// registry says the list is empty); a consumer restarted while ZooKeeper
// is down; a burst of 5,000 concurrent callers; network delay and
// connection loss between the consumers and one
// provider (a TCP proxy in the harness, registered in the provider's place
// with the protocol's register_address).
package chaos
