// Command provider is the chaos harness's provider: it serves
// chaossvc.Service as configured by a YAML file (config.Load; the service
// id is "chaos"), records every call it executes in its ledger, prints
// "serving NAME at HOST:PORT" once registered, and runs until SIGINT or
// SIGTERM, then shuts down gracefully (config.Application.Run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/examples/chaos/chaossvc"
	"github.com/minidubbo/minidubbo/examples/chaos/ledger"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run() error {
	cfgPath := flag.String("config", "", "YAML configuration (required); its service \"chaos\" is served")
	name := flag.String("name", "", "provider name, sent in every reply (required)")
	ledgerPath := flag.String("ledger", "", "file recording every executed call (required)")
	verbose := flag.Bool("v", false, "log framework events (warnings and above) to stderr")
	flag.Parse()
	if *cfgPath == "" || *name == "" || *ledgerPath == "" {
		return errors.New("-config, -name and -ledger are required")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log, err := chaossvc.Logger(*verbose)
	if err != nil {
		return err
	}
	led, err := ledger.CreateProvider(*ledgerPath)
	if err != nil {
		return err
	}
	defer led.Close()
	app, err := config.New(cfg, config.WithLogger(log.Named(*name)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	u, err := app.Export(ctx, "chaos", &chaossvc.Service{Name: *name, Ledger: led})
	cancel()
	if err != nil {
		_ = app.Shutdown(context.Background())
		return err
	}
	fmt.Printf("serving %s at %s\n", *name, u.Address())
	return app.Run(context.Background())
}
