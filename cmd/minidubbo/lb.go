package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/internal/named"
	"github.com/minidubbo/minidubbo/protocol"
)

const lbUsage = `usage: minidubbo lb [flags]

Shows which provider an algorithm picks, call after call, for made-up
providers. Examples:

  minidubbo lb -algo roundrobin -weights A=5,B=1,C=1 -n 7
  minidubbo lb -algo leastactive -weights A=1,B=1,C=1 -active A=3,B=0,C=1 -n 3
  minidubbo lb -algo random -weights A=1,B=3 -n 1000 -seed 7 -format json
  minidubbo lb -algo consistenthash -weights A=1,B=1,C=1 -keys 10000 -remove B

flags:
`

type lbResult struct {
	Algo     string         `json:"algo"`
	Sequence []string       `json:"sequence,omitempty"`
	Counts   map[string]int `json:"counts"`
	// consistenthash -keys
	Keys        int                `json:"keys,omitempty"`
	Shares      map[string]float64 `json:"shares,omitempty"`
	Removed     string             `json:"removed,omitempty"`
	CountsAfter map[string]int     `json:"countsAfter,omitempty"`
	Moved       *float64           `json:"moved,omitempty"`
}

func runLB(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, lbUsage)
		fs.PrintDefaults()
	}
	algo := fs.String("algo", loadbalance.Default, "algorithm: "+strings.Join(loadbalance.Builtin().Names(), ", "))
	weights := fs.String("weights", "A=100,B=100,C=100", "providers and their weights, name=weight,...")
	n := fs.Int("n", 10, "number of picks")
	format := fs.String("format", "text", "output format: text or json")
	active := fs.String("active", "", "calls in flight per provider, name=count,... (leastactive, shortestresponse, p2c)")
	rt := fs.String("rt", "", "recent response time per provider, name=duration,... (shortestresponse, p2c)")
	seed := fs.Uint64("seed", 0, "seed for repeatable random choices (0: not repeatable)")
	keys := fs.Int("keys", 0, "consistenthash: hash this many distinct keys and print each provider's share")
	remove := fs.String("remove", "", "consistenthash with -keys: remove this provider and print the fraction of keys that moved")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "minidubbo lb: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *format != "text" && *format != "json" {
		return fail(fmt.Errorf("unknown -format %q%s (known: json, text)", *format, named.DidYouMean(*format, []string{"json", "text"})))
	}
	if *n < 0 || *keys < 0 {
		return fail(errors.New("-n and -keys must not be negative"))
	}
	provs, err := parsePairs(*weights, "weights", "a whole number, 0 or more, such as A=100", func(s string) (int, error) {
		w, err := strconv.Atoi(s)
		if err == nil && w < 0 {
			err = errors.New("negative")
		}
		return w, err
	})
	if err != nil {
		return fail(err)
	}
	if len(provs) == 0 {
		return fail(errors.New("-weights names no provider"))
	}
	order := make([]string, len(provs))
	invokers := make([]protocol.Invoker, len(provs))
	byName := map[string]protocol.Invoker{}
	for i, p := range provs {
		order[i] = p.name
		u := protocol.NewURL("dubbo", p.name, 20880, "demo.Greeter", map[string]string{protocol.KeyWeight: strconv.Itoa(p.v)})
		invokers[i] = protocol.InvokerFunc{U: u}
		byName[p.name] = invokers[i]
	}
	lb, err := loadbalance.Builtin().New(*algo, loadbalance.WithSeed(*seed))
	if err != nil {
		return fail(err)
	}
	if *active != "" || *rt != "" {
		su, ok := lb.(loadbalance.StatsUser)
		if !ok {
			return fail(fmt.Errorf("-active and -rt apply to leastactive, shortestresponse and p2c, not %s", *algo))
		}
		acts, err := parsePairs(*active, "active", "a whole number of calls in flight, such as A=3", func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
		if err != nil {
			return fail(err)
		}
		rts, err := parsePairs(*rt, "rt", "a duration with a unit, such as A=10ms", time.ParseDuration)
		if err != nil {
			return fail(err)
		}
		for _, a := range rts {
			inv, ok := byName[a.name]
			if !ok {
				return fail(fmt.Errorf("-rt names %q, which is not in -weights", a.name))
			}
			st := su.Stats().For(inv)
			st.Begin(time.Now())
			st.End(time.Now(), a.v, false)
		}
		for _, a := range acts {
			inv, ok := byName[a.name]
			if !ok {
				return fail(fmt.Errorf("-active names %q, which is not in -weights", a.name))
			}
			su.Stats().For(inv).SetActive(a.v)
		}
	}
	res := lbResult{Algo: *algo, Counts: map[string]int{}}
	if *keys > 0 || *remove != "" {
		if *algo != loadbalance.ConsistentHash {
			return fail(fmt.Errorf("-keys and -remove apply to consistenthash, not %s", *algo))
		}
		if *keys == 0 {
			return fail(errors.New("-remove needs -keys"))
		}
		if err := hashKeys(lb, invokers, order, *keys, *remove, &res); err != nil {
			return fail(err)
		}
		return printKeys(stdout, *format, order, &res)
	}
	for _, name := range order {
		res.Counts[name] = 0
	}
	res.Sequence = make([]string, 0, *n)
	picker := lb.Build(invokers)
	for i := range *n {
		inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{"key-" + strconv.Itoa(i)}}
		k, err := picker.Pick(inv, nil)
		if err != nil {
			return fail(err)
		}
		p := invokers[k]
		res.Sequence = append(res.Sequence, p.URL().Host)
		res.Counts[p.URL().Host]++
	}
	if *format == "json" {
		return writeJSON(stdout, res)
	}
	for _, s := range res.Sequence {
		fmt.Fprintln(stdout, s)
	}
	return 0
}

func hashKeys(lb loadbalance.LoadBalance, invokers []protocol.Invoker, order []string, keys int, remove string, res *lbResult) error {
	res.Keys = keys
	owner := make([]string, keys)
	for _, name := range order {
		res.Counts[name] = 0
	}
	pick := func(list []protocol.Invoker, k int) (string, error) {
		inv := &protocol.Invocation{Service: "demo.Greeter", Method: "SayHello", Args: []any{"key-" + strconv.Itoa(k)}}
		p, err := loadbalance.Select(lb, list, inv)
		if err != nil {
			return "", err
		}
		return p.URL().Host, nil
	}
	for k := range keys {
		name, err := pick(invokers, k)
		if err != nil {
			return err
		}
		owner[k] = name
		res.Counts[name]++
	}
	res.Shares = shares(res.Counts, keys)
	if remove == "" {
		return nil
	}
	var rest []protocol.Invoker
	for _, p := range invokers {
		if p.URL().Host != remove {
			rest = append(rest, p)
		}
	}
	if len(rest) == len(invokers) {
		return fmt.Errorf("-remove %q is not in -weights", remove)
	}
	if len(rest) == 0 {
		return errors.New("-remove would leave no provider")
	}
	res.Removed = remove
	res.CountsAfter = map[string]int{}
	for _, p := range rest {
		res.CountsAfter[p.URL().Host] = 0
	}
	moved := 0
	for k := range keys {
		name, err := pick(rest, k)
		if err != nil {
			return err
		}
		res.CountsAfter[name]++
		if name != owner[k] {
			moved++
		}
	}
	f := float64(moved) / float64(keys)
	res.Moved = &f
	return nil
}

func shares(counts map[string]int, total int) map[string]float64 {
	out := make(map[string]float64, len(counts))
	for k, c := range counts {
		out[k] = float64(c) / float64(total)
	}
	return out
}

func printKeys(w io.Writer, format string, order []string, res *lbResult) int {
	if format == "json" {
		return writeJSON(w, res)
	}
	table := func(counts map[string]int) {
		for _, name := range order {
			if c, ok := counts[name]; ok {
				fmt.Fprintf(w, "%s %d %.2f%%\n", name, c, 100*float64(c)/float64(res.Keys))
			}
		}
	}
	table(res.Counts)
	if res.Moved != nil {
		fmt.Fprintf(w, "after removing %s:\n", res.Removed)
		table(res.CountsAfter)
		fmt.Fprintf(w, "moved %d of %d keys (%.2f%%)\n", int(*res.Moved*float64(res.Keys)+0.5), res.Keys, 100**res.Moved)
	}
	return 0
}

func writeJSON(w io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, "minidubbo lb: %v\n", err)
		return 1
	}
	fmt.Fprintln(w, string(b))
	return 0
}

type pair[T any] struct {
	name string
	v    T
}

// parsePairs parses "name=value,name=value", keeping the order; want says
// what a value must be.
func parsePairs[T any](s, flagName, want string, parse func(string) (T, error)) ([]pair[T], error) {
	var out []pair[T]
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("-%s: %q is not name=value", flagName, item)
		}
		if seen[name] {
			return nil, fmt.Errorf("-%s: %q given twice", flagName, name)
		}
		seen[name] = true
		v, err := parse(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("-%s: bad value %q for %s: want %s", flagName, val, name, want)
		}
		out = append(out, pair[T]{name, v})
	}
	return out, nil
}
