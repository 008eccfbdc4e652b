// Package cluster joins the invokers of a Directory into one invoker: routers
// narrow the list, a load balancer (cluster/loadbalance) picks one, and a
// fault-tolerance strategy (failover, failfast, failsafe, failback, forking,
// broadcast) decides what happens when a call fails.
//
//	o := cluster.DefaultOptions()            // failover, 2 retries, random
//	o.LoadBalance = loadbalance.LeastActive
//	o.Routers = []cluster.Router{cluster.NewTagRouter()}
//	c, err := cluster.New(dir, o)
//	if err != nil { ... } // unknown names list the known ones
//	defer c.Close()
//	res, err := c.Invoke(ctx, invocation)
//
// The directory publishes immutable, versioned Snapshots. For each snapshot
// the invoker derives, once, the subsets its routers narrow calls to
// (Router.Key names a call's subset, Router.Narrow computes it) and the
// load balancer's Picker for each subset; a pick (Invoker.Pick) is then
// one call on that state and allocates nothing, for tagged, untagged and
// retried calls alike.
//
// Every call a strategy makes to a provider goes through Invoker.Call,
// which counts it in the balancer's Stats (calls in flight, response
// times), so leastactive, shortestresponse and p2c work without any filter.
// The invoker alone decides availability: providers whose connection is
// down (protocol.IsAvailable) are skipped, and a call with no provider
// left fails with ErrNoProvider naming the service. Failover retries only failures where no answer came back
// (protocol.Retryable), never business errors.
//
// Routers: TagRouter (dubbo.tag / dubbo.force.tag attachments) and
// ConditionRouter (Dubbo's "consumer conditions => provider conditions"
// rules, from config strings or from the registry's routers category via
// ParseRouterURL and RoutersFromURLs).
package cluster
