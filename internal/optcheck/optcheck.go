// Package optcheck holds the one rule every layer's Options.Validate applies
// to its counts, sizes and durations: zero means the default (or no limit),
// negative is an error that names the field, its value and what zero would
// give.
package optcheck

import (
	"fmt"
	"time"
)

// Field is one count, size or duration to check. Default is what zero
// stands for: a time.Duration, a number, nil for "no limit", or, when zero
// stands for something that is not one value, a string saying what (a
// count) or a Said (a duration).
type Field struct {
	Name    string
	Value   int64
	Default any
}

// Said is the Default of a duration field whose zero stands for something
// that is not one value, such as "the registry's default" or "the default,
// twice SessionTimeout".
type Said string

// NonNegative returns an error, prefixed with pkg, naming the first field
// whose value is negative, or nil.
func NonNegative(pkg string, fields ...Field) error {
	for _, f := range fields {
		if f.Value >= 0 {
			continue
		}
		switch d := f.Default.(type) {
		case nil:
			return fmt.Errorf("%s: %s %d is negative (want 0 for no limit, or more)", pkg, f.Name, f.Value)
		case time.Duration:
			return fmt.Errorf("%s: %s %v is negative (want 0 for the default %v, or more)", pkg, f.Name, time.Duration(f.Value), d)
		case Said:
			return fmt.Errorf("%s: %s %v is negative (want 0 for %s, or more)", pkg, f.Name, time.Duration(f.Value), string(d))
		case string:
			return fmt.Errorf("%s: %s %d is negative (want 0 for %s, or more)", pkg, f.Name, f.Value, d)
		default:
			return fmt.Errorf("%s: %s %d is negative (want 0 for the default %d, or more)", pkg, f.Name, f.Value, d)
		}
	}
	return nil
}
