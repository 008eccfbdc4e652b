// Package config is the user's entry point: typed configuration with
// defaults and validation, loaded from YAML or built in Go; Export (service
// value → provider invoker → filters → protocol → registry) and Refer
// (registry → directory → cluster → consumer stub); and the application
// lifecycle with graceful shutdown.
package config
