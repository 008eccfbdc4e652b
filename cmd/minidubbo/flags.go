package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/internal/named"
)

// parseFlags parses args into fs, the flags of the command fs.Name(). -h
// prints the command's usage (fs.Usage) and a bad flag one message that
// says what is wrong and what to do, instead of the flag package's error
// followed by the whole usage. done is true when the command should end
// with code.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		usage()
		return 0, true
	}
	fmt.Fprintf(stderr, "minidubbo %s: %s\n", fs.Name(), flagProblem(fs, err))
	return 2, true
}

var (
	unknownFlag  = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	missingValue = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
	badValue     = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]*): `)
)

// flagProblem rewrites a flag package error: an unknown flag gets the
// nearest known one and the list; a missing or bad value says what the
// flag takes.
func flagProblem(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	help := fmt.Sprintf("(minidubbo %s -h describes every flag)", fs.Name())
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		hint := ""
		if c := named.Closest(m[1], names); c != "" {
			hint = "; did you mean -" + c + "?"
		}
		return fmt.Sprintf("unknown flag -%s%s (flags: -%s)", m[1], hint, strings.Join(names, ", -"))
	}
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[1]); f != nil {
			return fmt.Sprintf("-%s needs %s, such as -%s %s", m[1], takes(f), m[1], example(f))
		}
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			if _, ok := valueOf(f).(bool); ok {
				return fmt.Sprintf("-%s=%s: -%s is true or false, written -%s or -%s=false", m[2], m[1], m[2], m[2], m[2])
			}
			return fmt.Sprintf("-%s %q: -%s takes %s, such as -%s %s", m[2], m[1], m[2], takes(f), m[2], example(f))
		}
	}
	return msg + " " + help
}

// takes says what kind of value f takes.
func takes(f *flag.Flag) string {
	switch valueOf(f).(type) {
	case time.Duration:
		return "a duration with a unit (ms, s, m, h)"
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	what, _, _ := strings.Cut(f.Usage, " (default")
	return "a value (" + strings.TrimSuffix(what, ".") + ")"
}

// example is a value of f's kind: its default when it has one.
func example(f *flag.Flag) string {
	switch valueOf(f).(type) {
	case time.Duration:
		if f.DefValue != "0s" {
			return f.DefValue
		}
		return "5s"
	}
	if f.DefValue != "" && f.DefValue != "0" {
		return f.DefValue
	}
	return "VALUE"
}

func valueOf(f *flag.Flag) any {
	if g, ok := f.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}
