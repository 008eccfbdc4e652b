package config

import (
	"errors"
	"strings"
)

// A KeyError is an error that one key of the configuration is behind:
// New refusing the key's value, or Export failing in a way a change of
// that key cures (a port taken: protocols.dubbo.port; a registry that did
// not answer: registries.zk.address). Its message names keys as YAML writes
// them and, when there is advice, ends with it in parentheses.
//
// A program that fills Config from its own flags or settings finds the
// KeyError with errors.As, speaks of its own name for Key, and gives its
// own advice instead of Advice, which is in the configuration's terms:
// WithoutAdvice(err) is err without it. The hello example's FlagHint and
// RegistryHint do so.
type KeyError struct {
	Key    string // the key's path, such as "references.greeter.loadbalance"
	Advice string // what to do, in the configuration's terms; "" when the message says it all
	Err    error  // what went wrong: the message without Advice
}

func (e *KeyError) Error() string {
	if e.Advice == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + " (" + e.Advice + ")"
}

func (e *KeyError) Unwrap() error { return e.Err }

// WithoutAdvice returns err with the advice of the first KeyError in its
// chain left out of its message, for a program that gives its own
// advice; errors.Is and errors.As see the same chain as in err. Without
// such a KeyError it returns err.
func WithoutAdvice(err error) error {
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Advice == "" {
		return err
	}
	return &unadvised{msg: strings.Replace(err.Error(), " ("+ke.Advice+")", "", 1), err: err}
}

type unadvised struct {
	msg string
	err error
}

func (u *unadvised) Error() string { return u.msg }
func (u *unadvised) Unwrap() error { return u.err }

// keyOf is the key a validation message begins with: every message of
// validate starts with the key's path, followed by a space or a colon.
func keyOf(msg string) string {
	if i := strings.IndexAny(msg, " :"); i >= 0 {
		return msg[:i]
	}
	return msg
}
