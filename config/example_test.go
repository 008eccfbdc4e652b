package config_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/service"
)

// Greeter is a provider: each exported method takes a context first and
// returns a value and an error.
type Greeter struct{}

func (Greeter) SayHello(_ context.Context, name string) (string, error) {
	if name == "" {
		return "", service.Errorf(service.CodeInvalidArgument, "name is empty")
	}
	return "hello, " + name, nil
}

// GreeterClient is the consumer stub; Refer fills its func fields.
type GreeterClient struct {
	SayHello func(ctx context.Context, name string) (string, error)
}

// A provider and a consumer in one process, found through an in-process
// registry. With a ZooKeeper address instead of memory:// the code is the
// same.
func Example() {
	ctx := context.Background()
	app, err := config.New(&config.Config{
		Application: config.ApplicationConfig{Name: "example"},
		Registries:  map[string]config.RegistryConfig{"local": {Address: "memory://local"}},
		Services:    map[string]config.ServiceConfig{"greeter": {Interface: "demo.Greeter"}},
		References:  map[string]config.ReferenceConfig{"greeter": {Interface: "demo.Greeter", Check: true}},
	})
	if err != nil {
		panic(err)
	}
	defer app.Shutdown(ctx)
	if _, err := app.Export(ctx, "greeter", Greeter{}); err != nil {
		panic(err)
	}
	var g GreeterClient
	if err := app.Refer(ctx, "greeter", &g); err != nil {
		panic(err)
	}
	reply, err := g.SayHello(ctx, "world")
	fmt.Println(reply, err)
	_, err = g.SayHello(ctx, "")
	var se *service.Error
	fmt.Println(errors.As(err, &se), se.Code, se.Message)
	// Output:
	// hello, world <nil>
	// true invalid argument name is empty
}
