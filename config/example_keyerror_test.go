package config_test

import (
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/config"
)

// A program that fills Config from its own flags names its flag, not
// the YAML key, when New refuses a value.
func ExampleKeyError() {
	flags := map[string]string{"references.greeter.loadbalance": "-lb"}
	_, err := config.New(&config.Config{
		Registries: map[string]config.RegistryConfig{"mem": {Address: "memory://example-keyerror"}},
		References: map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", LoadBalance: "roundrobbin"}},
	})
	var ke *config.KeyError
	if errors.As(err, &ke) {
		fmt.Printf("%s: %v\n", flags[ke.Key], config.WithoutAdvice(err))
	}
	// Output:
	// -lb: config: references.greeter.loadbalance: unknown "roundrobbin"; did you mean "roundrobin"? (known: consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)
}
