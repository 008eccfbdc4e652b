package config

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/minidubbo/minidubbo/internal/named"
)

// LoggingConfig sets up the application's default logger (used unless
// WithLogger gives one). By default warnings and errors go to standard
// error, one line each, so a registry that cannot be reached or a
// provider that died is never silent.
type LoggingConfig struct {
	// Level is the lowest level written: debug, info, warn (default) or
	// error. At info the application also logs registry connections,
	// session changes, provider-list changes and providers leaving.
	Level string `yaml:"level"`
	// Format is console (default; human-readable lines) or json (one
	// object per line).
	Format string `yaml:"format"`
}

var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"console", "json"}
)

// validate fills defaults and returns what is wrong, in YAML terms.
func (l *LoggingConfig) validate() []string {
	var bad []string
	if l.Level == "" {
		l.Level = "warn"
	}
	if l.Format == "" {
		l.Format = "console"
	}
	l.Level, l.Format = strings.ToLower(l.Level), strings.ToLower(l.Format)
	if _, err := zapcore.ParseLevel(l.Level); err != nil || !contains(logLevels, l.Level) {
		bad = append(bad, fmt.Sprintf("logging.level %q: unknown%s (known: %s)", l.Level, suggest(l.Level, logLevels), strings.Join(logLevels, ", ")))
	}
	if !contains(logFormats, l.Format) {
		bad = append(bad, fmt.Sprintf("logging.format %q: unknown%s (known: %s)", l.Format, suggest(l.Format, logFormats), strings.Join(logFormats, ", ")))
	}
	return bad
}

// newLogger builds the logger l describes, writing to w (os.Stderr when
// nil).
func (l LoggingConfig) newLogger(w io.Writer) *zap.Logger {
	if w == nil {
		w = os.Stderr
	}
	level, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		level = zapcore.WarnLevel
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if l.Format == "json" {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level))
}

// suggest returns a "did you mean" hint for name among known, or "".
func suggest(name string, known []string) string { return named.DidYouMean(name, known) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
