// Command minidubbo is the command-line tool of minidubbo. Each subcommand
// is named by its first argument:
//
//	minidubbo lb -algo roundrobin -weights A=5,B=1,C=1 -n 7
//	minidubbo ls -registry zookeeper://127.0.0.1:2181 -service demo.hello.Greeter
//	minidubbo invoke -service demo.hello.Greeter -method SayHello -args '["world"]'
//	minidubbo monitor -registry zookeeper://127.0.0.1:2181 -http 127.0.0.1:8080 -data DIR
//	minidubbo report -monitor http://127.0.0.1:8080 -since 10m -by provider
//
// lb explores a load-balancing algorithm on made-up providers; ls lists what
// is registered in ZooKeeper (services, their providers with address,
// version, group, weight and methods, and how many consumers); invoke calls
// one method through the whole framework, found in the registry or at -url,
// and prints the result as JSON; monitor runs the monitor server (the
// monitor service, SQLite history, dashboard, /api/report, /metrics);
// report prints the call-count report from a monitor server or its data
// directory.
//
// Run it without arguments to list the subcommands.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/minidubbo/minidubbo/internal/named"
)

// command is one subcommand: run gets the arguments after its name and
// returns the exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the table of subcommands, by name. To add one, add a line.
var commands = map[string]command{
	"invoke":  {"call one method of a service and print the result as JSON", runInvoke},
	"lb":      {"explore a load-balancing algorithm without servers", runLB},
	"ls":      {"list the services, providers and consumers registered in ZooKeeper", runLS},
	"monitor": {"run the monitor server: store reports, serve a dashboard, JSON and /metrics", runMonitor},
	"report":  {"print the call-count report from a monitor server or its data directory", runReport},
}

// aliases are the other names a newcomer may try for a command.
var aliases = map[string]string{"list": "ls", "call": "invoke"}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches to the subcommand named by args[0].
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			// help <command>: the command's own usage.
			return run([]string{args[1], "-h"}, stdout, stderr)
		}
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		hint := named.DidYouMean(args[0], names())
		if alias, ok := aliases[args[0]]; ok {
			hint = `; did you mean "` + alias + `"?`
		}
		if strings.HasPrefix(args[0], "-") {
			hint = "; the command comes first, then its flags: minidubbo <command> " + args[0] + " ..."
		}
		fmt.Fprintf(stderr, "minidubbo: unknown command %q%s (known: %s)\n", args[0], hint, strings.Join(names(), ", "))
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func names() []string {
	out := make([]string, 0, len(commands))
	for n := range commands {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: minidubbo <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, n := range names() {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run minidubbo <command> -h for the flags of a command.")
}

// zooKeeperHint is what a newcomer can do when ZooKeeper at servers did
// not answer.
func zooKeeperHint(servers string) string {
	return "(is ZooKeeper running at " + servers + "? In the minidubbo directory, make zk-start starts one on 127.0.0.1:2181)"
}
