// Command consumer is the chaos harness's consumer: it refers
// chaossvc.Service as configured by a YAML file (config.Load; the reference
// id is "chaos") and calls it from -concurrency goroutines, each pausing
// -interval between calls, until SIGINT or SIGTERM (or -duration). Every
// call gets a unique id and is written to the ledger when sent and when it
// ends. On a signal it stops sending, waits for the calls in flight, writes
// the ledger out, prints one JSON summary line and shuts down.
//
// It prints "ready NAME" once its reference is built.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/examples/chaos/chaossvc"
	"github.com/minidubbo/minidubbo/examples/chaos/ledger"
	"github.com/minidubbo/minidubbo/service"
	"github.com/minidubbo/minidubbo/status"
)

// Summary is the line printed at exit.
type Summary struct {
	Name   string `json:"name"`
	Calls  int64  `json:"calls"`
	OK     int64  `json:"ok"`
	Failed int64  `json:"failed"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfgPath := flag.String("config", "", "YAML configuration (required); its reference \"chaos\" is called")
	name := flag.String("name", "", "consumer name; call ids are NAME-SEQ (required, unique per run)")
	ledgerPath := flag.String("ledger", "", "file recording every call sent and its end (required)")
	concurrency := flag.Int("concurrency", 8, "concurrent callers")
	interval := flag.Duration("interval", 20*time.Millisecond, "pause of each caller between calls")
	duration := flag.Duration("duration", 0, "stop after this long (0: at SIGINT/SIGTERM only)")
	verbose := flag.Bool("v", false, "log framework events (warnings and above) to stderr")
	flag.Parse()
	if *cfgPath == "" || *name == "" || *ledgerPath == "" {
		return errors.New("-config, -name and -ledger are required")
	}
	if *concurrency < 1 || *concurrency > 100_000 || *interval < 0 || *duration < 0 {
		return errors.New("-concurrency must be 1..100000, -interval and -duration not negative")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log, err := chaossvc.Logger(*verbose)
	if err != nil {
		return err
	}
	led, err := ledger.CreateConsumer(*ledgerPath)
	if err != nil {
		return err
	}
	defer led.Close()

	// The load stops at a signal or after -duration; calls in flight run
	// to their end (bounded by the reference's timeout and retries).
	load, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		load, cancel = context.WithTimeout(load, *duration)
		defer cancel()
	}

	app, err := config.New(cfg, config.WithLogger(log.Named(*name)))
	if err != nil {
		return err
	}
	var c chaossvc.Client
	if err := app.Refer(load, "chaos", &c); err != nil {
		_ = app.Shutdown(context.Background())
		return err
	}
	fmt.Printf("ready %s\n", *name)

	flushDone := make(chan struct{})
	flushStop := make(chan struct{})
	go func() { // the harness follows the ledger while it is written
		defer close(flushDone)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-flushStop:
				return
			case <-t.C:
				_ = led.Flush()
			}
		}
	}()

	var seq, ok, failed, shown atomic.Int64
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() {
			var pause *time.Timer
			if *interval > 0 {
				pause = time.NewTimer(*interval)
				defer pause.Stop()
			}
			for load.Err() == nil {
				id := *name + "-" + strconv.FormatInt(seq.Add(1), 10)
				led.Sent(id)
				start := time.Now()
				r, err := c.Call(context.Background(), id)
				switch {
				case err != nil:
					failed.Add(1)
					k := kindOf(err)
					led.Failed(id, k, start, time.Now())
					if shown.Add(1) <= maxShown {
						fmt.Fprintf(os.Stderr, "consumer %s: call %s failed (%s): %v\n", *name, id, k, err)
					}
				case r == nil:
					failed.Add(1)
					led.Failed(id, "nil_reply", start, time.Now())
				default:
					ok.Add(1)
					led.Succeeded(id, r.Provider, start, time.Now())
				}
				if pause != nil {
					pause.Reset(*interval)
					select {
					case <-load.Done():
					case <-pause.C:
					}
				}
			}
		})
	}
	wg.Wait()
	close(flushStop)
	<-flushDone
	if err := led.Close(); err != nil {
		return err
	}
	s := Summary{Name: *name, Calls: seq.Load(), OK: ok.Load(), Failed: failed.Load()}
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), app.Config().Shutdown.Timeout)
	defer cancel()
	if err := app.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "consumer: shutdown:", err)
	}
	return nil
}

// maxShown bounds the failed calls described on stderr.
const maxShown = 20

// kindOf names the class of a failed call for the ledger.
func kindOf(err error) string {
	var se *service.Error
	switch {
	case errors.As(err, &se):
		return "business"
	case errors.Is(err, cluster.ErrNoProvider):
		return "no_provider"
	case errors.Is(err, status.ErrServerBusy):
		return "server_busy"
	case errors.Is(err, status.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, status.ErrReadOnly):
		return "provider_closing"
	case errors.Is(err, status.ErrConnLost), errors.Is(err, status.ErrClosed), errors.Is(err, status.ErrDial):
		return "connection"
	}
	return "other"
}
