package cluster

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
)

// failover tries up to Retries+1 providers, a different one each time when
// possible, retrying only failures where no answer came back
// (protocol.Retryable); a business error or any other answer is returned
// at once. The provider list is read again before each retry. A call that
// was sent and timed out may therefore run twice.
//
// The first attempt runs here and the retries in failoverRetry: the
// first attempt's frame, which every waiting call keeps on its stack,
// holds no list of tried providers or errors.
func failover(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, failoverStopped(inv, nil, err)
	}
	p, err := c.pick(inv, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.Call(ctx, p, inv)
	if err == nil {
		return res, nil
	}
	return failoverRetry(ctx, c, inv, p, err)
}

// failoverStrategy is the built-in failover; the cluster invoker calls
// failover itself, where the compiler can inline it.
type failoverStrategy struct{}

// Invoke implements Strategy.
func (failoverStrategy) Invoke(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	return failover(ctx, c, inv)
}

// failoverRetry goes on after failover's first attempt failed with err
// on p.
//
//go:noinline
func failoverRetry(ctx context.Context, c *Invoker, inv *protocol.Invocation, p protocol.Invoker, err error) (*protocol.Result, error) {
	if !protocol.Retryable(err) {
		return nil, wrap(Failover, inv, p, err)
	}
	attempts := c.Retries(inv) + 1
	errs := []error{failoverAttempt(p, 0, err)}
	var tried Tried
	tried.Add(p)
	for attempt := 1; attempt < attempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, failoverStopped(inv, errs, err)
		}
		p, err := c.Pick(inv, tried)
		if err != nil {
			return nil, failoverNoRetry(inv, errs, err)
		}
		res, err := c.Call(ctx, p, inv)
		if err == nil {
			failoverRetried(c, inv, attempt, errs)
			return res, nil
		}
		if !protocol.Retryable(err) {
			return nil, failoverAnswered(inv, p, attempt, errs, err)
		}
		errs = append(errs, failoverAttempt(p, attempt, err))
		tried.Add(p)
	}
	return nil, failoverFailed(inv, errs)
}

// The rare paths of failover, out of line: their logging fields and
// formatting arguments would otherwise make failover's stack frame, which
// every waiting call keeps, about four times as large.

//go:noinline
func failoverRetried(c *Invoker, inv *protocol.Invocation, attempt int, errs []error) {
	c.log.Debug("failover succeeded after retries", zap.String("service", serviceOf(inv)),
		zap.String("method", inv.Method), zap.Int("attempt", attempt+1), zap.Errors("errors", errs))
}

//go:noinline
func failoverAnswered(inv *protocol.Invocation, p protocol.Invoker, attempt int, errs []error, err error) error {
	errs = append(errs, wrap(Failover, inv, p, err))
	return fmt.Errorf("cluster: failover %s.%s: attempt %d got an answer: %w", serviceOf(inv), inv.Method, attempt+1, errors.Join(errs...))
}

//go:noinline
func failoverAttempt(p protocol.Invoker, attempt int, err error) error {
	return fmt.Errorf("attempt %d on %s: %w", attempt+1, p.URL().Address(), err)
}

// failoverFailed is the error of a failover whose attempts all failed,
// errs holding one error per attempt.
//
//go:noinline
func failoverFailed(inv *protocol.Invocation, errs []error) error {
	return fmt.Errorf("cluster: failover %s.%s: %s failed: %w", serviceOf(inv), inv.Method, plural(len(errs), "attempt"), errors.Join(errs...))
}

// failoverStopped is the error of a failover that made no more attempts
// because the call's context ended (ctxErr, its error, not an attempt),
// after the attempts of errs.
//
//go:noinline
func failoverStopped(inv *protocol.Invocation, errs []error, ctxErr error) error {
	if len(errs) == 0 {
		return fmt.Errorf("cluster: failover %s.%s: the call's context ended before the first attempt: %w",
			serviceOf(inv), inv.Method, ctxErr)
	}
	return fmt.Errorf("cluster: failover %s.%s: the call's context ended (%w) after %s, which failed: %w",
		serviceOf(inv), inv.Method, ctxErr, plural(len(errs), "attempt"), errors.Join(errs...))
}

// failoverNoRetry is the error of a failover that found no provider to
// retry on (pickErr says why) after the attempts of errs.
//
//go:noinline
func failoverNoRetry(inv *protocol.Invocation, errs []error, pickErr error) error {
	return fmt.Errorf("cluster: failover %s.%s: %s failed, then no provider to retry on (%w): %w",
		serviceOf(inv), inv.Method, plural(len(errs), "attempt"), pickErr, errors.Join(errs...))
}

// failfast makes one attempt and returns its error.
func failfast(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	p, err := c.Pick(inv, Tried{})
	if err != nil {
		return nil, err
	}
	res, err := c.Call(ctx, p, inv)
	if err != nil {
		return nil, wrap(Failfast, inv, p, err)
	}
	return res, nil
}

// failsafe makes one attempt; a failure is logged and the caller gets an
// empty result (the zero value) and no error. A business error is the
// service's answer, not a failure: it is returned as it is.
func failsafe(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	res, err := failfast(ctx, c, inv)
	if err != nil && !isBusiness(err) {
		c.log.Warn("failsafe: call failed, returning an empty result", zap.String("service", serviceOf(inv)),
			zap.String("method", inv.Method), zap.Error(err))
		return &protocol.Result{}, nil
	}
	return res, err
}

// broadcast calls every provider, one after the other, and fails if any
// fails, with every error; otherwise it returns the last result.
func broadcast(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	invokers, err := c.Providers(inv)
	if err != nil {
		return nil, err
	}
	var errs []error
	var last *protocol.Result
	for i, p := range invokers {
		if err := ctx.Err(); err != nil {
			return nil, broadcastStopped(inv, err, i, len(invokers), errs)
		}
		res, err := c.Call(ctx, p, inv)
		if err != nil {
			errs = append(errs, wrap(Broadcast, inv, p, err))
			continue
		}
		last = res
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("cluster: broadcast %s.%s: %d of %s failed: %w", serviceOf(inv), inv.Method, len(errs), plural(len(invokers), "provider"), errors.Join(errs...))
	}
	return last, nil
}

// broadcastStopped is the error of a broadcast whose context ended
// (ctxErr) after it called called of n providers, errs holding the
// failures among them: the context's end is not a provider's failure.
func broadcastStopped(inv *protocol.Invocation, ctxErr error, called, n int, errs []error) error {
	if len(errs) == 0 {
		return fmt.Errorf("cluster: broadcast %s.%s: the call's context ended (%w) after calling %d of %s, none of which failed",
			serviceOf(inv), inv.Method, ctxErr, called, plural(n, "provider"))
	}
	return fmt.Errorf("cluster: broadcast %s.%s: the call's context ended (%w) after calling %d of %s, %d of which failed: %w",
		serviceOf(inv), inv.Method, ctxErr, called, plural(n, "provider"), len(errs), errors.Join(errs...))
}

// forking calls Forks providers at once and returns the first success,
// cancelling the others; it fails only when all fail. Each parallel call
// decodes into its own reply, and the winner's is copied into the
// caller's. Invoke returns only once every fork has returned (the others
// are cancelled first), since a fork still running would read the
// caller's arguments, which the caller may reuse as soon as Invoke
// returns (package service, "Byte slices and ownership").
type forking struct {
	wg sync.WaitGroup
}

type outcome struct {
	res   *protocol.Result
	err   error
	p     protocol.Invoker
	reply any
}

// Invoke implements Strategy.
func (f *forking) Invoke(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	invokers, err := c.Providers(inv)
	if err != nil {
		return nil, err
	}
	targets := invokers
	if n := c.Forks(); n < len(invokers) {
		targets = make([]protocol.Invoker, 0, n)
		var tried Tried
		for len(targets) < n {
			p, err := c.Pick(inv, tried)
			if err != nil {
				return nil, err
			}
			if tried.Has(p) {
				break
			}
			tried.Add(p)
			targets = append(targets, p)
		}
	}
	if len(targets) == 1 {
		res, err := c.Call(ctx, targets[0], inv)
		if err != nil {
			return nil, wrap(Forking, inv, targets[0], err)
		}
		return res, nil
	}
	fctx, cancel := context.WithCancel(ctx)
	results := make(chan outcome, len(targets))
	pending := len(targets)
	defer func() {
		// The forks still running end on the cancel, promptly: the
		// protocol's call returns on its context and gives back the
		// request's bytes first.
		cancel()
		for ; pending > 0; pending-- {
			<-results
		}
	}()
	for _, p := range targets {
		fi := *inv
		if rt := reflect.TypeOf(inv.Reply); rt != nil && rt.Kind() == reflect.Pointer {
			fi.Reply = reflect.New(rt.Elem()).Interface()
		}
		f.wg.Go(func() {
			res, err := c.Call(fctx, p, &fi)
			results <- outcome{res, err, p, fi.Reply}
		})
	}
	var errs []error
	for range targets {
		select {
		case o := <-results:
			pending--
			if o.err != nil {
				errs = append(errs, wrap(Forking, inv, o.p, o.err))
				continue
			}
			if o.reply != nil && o.reply != inv.Reply {
				reflect.ValueOf(inv.Reply).Elem().Set(reflect.ValueOf(o.reply).Elem())
				if o.res != nil && o.res.Value == o.reply {
					r := *o.res
					r.Value = inv.Reply
					o.res = &r
				}
			}
			return o.res, nil
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			return nil, fmt.Errorf("cluster: forking %s.%s: %w", serviceOf(inv), inv.Method, errors.Join(errs...))
		}
	}
	return nil, fmt.Errorf("cluster: forking %s.%s: all %s failed: %w", serviceOf(inv), inv.Method, plural(len(targets), "provider"), errors.Join(errs...))
}

// Close waits for forked calls still running.
func (f *forking) Close() error {
	f.wg.Wait()
	return nil
}

// failback makes one attempt; on failure the caller gets an empty result
// and no error, and the call is retried in the background (a business
// error is the service's answer and is returned, not retried), up to
// FailbackRetries times on another provider when possible, after
// FailbackBackoff, doubling each time. At most FailbackQueue calls wait;
// a failure that finds the queue full (or the invoker closed) is returned
// to the caller. Retries run with the caller's context values but not its
// cancellation, each bounded by FailbackTimeout; their reply is
// discarded, and their arguments are a deep copy of the caller's (slices,
// maps, pointers and exported struct fields all the way down), as the
// caller may reuse them once Invoke returns. Close stops the retries and
// waits for the goroutine.
type failback struct {
	o      Options
	log    *zap.Logger
	stop   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	tasks   taskHeap
	started bool
	closed  bool
}

type task struct {
	ctx     context.Context
	c       *Invoker
	inv     *protocol.Invocation
	last    protocol.Invoker
	due     time.Time
	attempt int // retries made so far
}

// taskHeap orders waiting retries by due time (container/heap).
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)        { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

func newFailback(o Options) *failback {
	ctx, cancel := context.WithCancel(context.Background())
	return &failback{o: o, log: o.Logger.Named("failback"), stop: make(chan struct{}), ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
}

// Invoke implements Strategy.
func (f *failback) Invoke(ctx context.Context, c *Invoker, inv *protocol.Invocation) (*protocol.Result, error) {
	p, err := c.Pick(inv, Tried{})
	if err == nil {
		var res *protocol.Result
		if res, err = c.Call(ctx, p, inv); err == nil {
			return res, nil
		}
		if isBusiness(err) {
			return nil, err
		}
		err = wrap(Failback, inv, p, err)
	}
	if qerr := f.enqueue(ctx, c, inv, p); qerr != nil {
		return nil, fmt.Errorf("%w (%w)", err, qerr)
	}
	f.log.Warn("call failed, retrying in the background", zap.String("service", serviceOf(inv)),
		zap.String("method", inv.Method), zap.Error(err))
	return &protocol.Result{}, nil
}

func (f *failback) enqueue(ctx context.Context, c *Invoker, inv *protocol.Invocation, last protocol.Invoker) error {
	// the caller may reuse its invocation and reply: retry with a copy
	cp := *inv
	cp.Reply = nil
	cp.Args = slices.Clone(inv.Args)
	for i, a := range cp.Args {
		// The caller may reuse its arguments once Invoke returns
		// (package service, "Byte slices and ownership").
		cp.Args[i] = deepCopy(a)
	}
	cp.Attachments = maps.Clone(inv.Attachments)
	t := &task{ctx: context.WithoutCancel(ctx), c: c, inv: &cp, last: last, due: time.Now().Add(f.o.FailbackBackoff)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if len(f.tasks) >= f.o.FailbackQueue {
		return fmt.Errorf("cluster: failback queue full (%d calls waiting), not retried", len(f.tasks))
	}
	heap.Push(&f.tasks, t)
	if !f.started {
		f.started = true
		f.wg.Go(f.loop)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return nil
}

func (f *failback) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f.mu.Lock()
		var next *task
		wait := time.Hour
		if len(f.tasks) > 0 {
			if d := time.Until(f.tasks[0].due); d <= 0 {
				next = heap.Pop(&f.tasks).(*task)
			} else {
				wait = d
			}
		}
		f.mu.Unlock()
		if next != nil {
			f.retry(next)
			continue
		}
		timer.Reset(wait)
		select {
		case <-f.stop:
			return
		case <-f.wake:
		case <-timer.C:
		}
	}
}

func (f *failback) retry(t *task) {
	t.attempt++
	ctx, cancel := context.WithTimeout(t.ctx, f.o.FailbackTimeout)
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	var tried Tried
	if t.last != nil {
		tried.Add(t.last)
	}
	p, err := t.c.Pick(t.inv, tried)
	if err == nil {
		if _, err = t.c.Call(ctx, p, t.inv); err == nil || isBusiness(err) {
			f.log.Info("background retry succeeded", zap.String("service", serviceOf(t.inv)),
				zap.String("method", t.inv.Method), zap.Int("retry", t.attempt))
			return
		}
		t.last = p
	}
	if t.attempt >= f.o.FailbackRetries || f.ctx.Err() != nil {
		f.log.Error("giving up on failed call", zap.String("service", serviceOf(t.inv)),
			zap.String("method", t.inv.Method), zap.Int("retries", t.attempt), zap.Error(err))
		return
	}
	t.due = time.Now().Add(f.o.FailbackBackoff << t.attempt)
	f.mu.Lock()
	if !f.closed {
		heap.Push(&f.tasks, t)
	}
	f.mu.Unlock()
}

// Pending returns the number of calls waiting for a background retry.
func (f *failback) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tasks)
}

// Close stops the background retries, dropping those still waiting, and
// waits for the goroutine. It is idempotent.
func (f *failback) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.tasks = nil
	close(f.stop)
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	return nil
}

// plural returns "1 attempt", "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
