package config

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary YAML to the configuration loader: a valid
// configuration or an error, never a panic (anchors and aliases included).
func FuzzParse(f *testing.F) {
	f.Add(sampleYAML)
	f.Add("references: {a: {interface: x, timeout: 9223372036854775807ns}}")
	f.Add("a: &a [*a, *a]\nb: *a")
	f.Add("services: {s: {interface: x, weight: -1, executes: -1}}")
	f.Add("protocols: {dubbo: {port: 99999}}")
	f.Add("protocols: {dubbo: {tls: {cert_file: /nonexistent, client_ca_file: ''}}}\nconsumer: {tls: {cert_file: a}}")
	f.Add("references: {a: {interface: x, url: '127.0.0.1:1', tls: {ca_file: x, server_name: ''}}}\nconsumer: {tls: null}")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4<<10 {
			return
		}
		_, _ = Parse(strings.NewReader(s))
	})
}
