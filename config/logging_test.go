package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func TestLoggingDefaultsToWarningsOnStderr(t *testing.T) {
	c, err := Parse(strings.NewReader("application: {name: x}\n"))
	require.NoError(t, err)
	assert.Equal(t, LoggingConfig{Level: "warn", Format: "console"}, c.Logging)
	var buf bytes.Buffer
	log := c.Logging.newLogger(&buf)
	log.Info("quiet")
	log.Warn("registry unreachable", zap.String("registry", "zookeeper://127.0.0.1:1"))
	out := buf.String()
	assert.NotContains(t, out, "quiet")
	assert.Regexp(t, `^\S+\tWARN\tregistry unreachable\t\{"registry": "zookeeper://127.0.0.1:1"\}\n$`, out)
}

func TestLoggingFromYAML(t *testing.T) {
	c, err := Parse(strings.NewReader("logging: {level: info, format: json}\n"))
	require.NoError(t, err)
	var buf bytes.Buffer
	c.Logging.newLogger(&buf).Named("directory").Info("providers changed", zap.Int("providers", 2))
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	assert.Equal(t, "info", line["level"])
	assert.Equal(t, "directory", line["logger"])
	assert.Equal(t, "providers changed", line["msg"])
	assert.Equal(t, float64(2), line["providers"])

	_, err = Parse(strings.NewReader("logging: {level: wran, format: text}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `logging.level "wran": unknown; did you mean "warn"? (known: debug, info, warn, error)`)
	assert.Contains(t, err.Error(), `logging.format "text": unknown (known: console, json)`)
}
