// Package proxy turns user code into invokers and invokers into user code:
// consumer stubs fill the func fields of a user struct with closures that
// build an Invocation and call an invoker; provider invokers dispatch an
// Invocation to a method of a service value. It also offers generic
// invocation (method name and []any arguments) for tools.
package proxy
