// Package loadbalance picks one provider out of many for each call.
//
// Every algorithm implements LoadBalance and is known by name in a Table:
//
//	t := loadbalance.Builtin()
//	lb, err := t.New(loadbalance.RoundRobin)
//	if err != nil { ... } // an unknown name lists the known ones
//	picker := lb.Build(invokers) // once per provider list
//	i, err := picker.Pick(invocation, nil) // per call: invokers[i]
//
// The built-in algorithms are random (weighted, the default), roundrobin
// (smooth weighted round robin per service and method), leastactive (fewest
// calls in flight), consistenthash (a ring of virtual nodes built from the
// sorted provider set), shortestresponse (recent response time times calls
// in flight) and p2c (the better of two random picks). The weighted ones
// honour a provider's warm-up: its weight grows linearly from the start
// time in its URL over the warm-up period (see Weight).
//
// leastactive, shortestresponse and p2c read per-provider statistics from a
// Stats, which the cluster invoker updates on every call it makes (Begin and
// End). A balancer derives what it needs from a list (weights, statistics,
// rings) once, in Build; Pick reads it without parsing or allocating, and
// skips the providers its Exclude names (tried by the call, or down), so a
// retry needs no new list. State that outlives a list (round-robin
// positions, statistics) is keyed by provider identity in the balancer.
package loadbalance
