// Package cluster joins the invokers of a Directory into one invoker: routers
// narrow the list, a load balancer (cluster/loadbalance) picks one, and a
// fault-tolerance strategy (failover, failfast, failsafe, failback, forking,
// broadcast) decides what happens when a call fails.
package cluster
