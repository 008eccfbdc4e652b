package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var durationType = reflect.TypeFor[time.Duration]()

// movedKeys are keys that moved to another place, by the struct they were
// in and their name there: an old key is an error naming its new place
// (relative to the struct) and showing it.
var movedKeys = map[reflect.Type]map[string]movedKey{
	reflect.TypeFor[RegistryConfig](): {
		"session_timeout": {to: "zookeeper.session_timeout", example: "zookeeper: {session_timeout: 10s}"},
		"username":        {to: "zookeeper.username", example: "zookeeper: {username: u, password: p}"},
		"password":        {to: "zookeeper.password", example: "zookeeper: {username: u, password: p}"},
	},
}

// topLevelHints answer the top-level keys a Dubbo user writes out of
// habit (Spring's dubbo.registry.address, one registry, one protocol).
var topLevelHints = map[string]string{
	"dubbo":     "write this file's keys at the top level, without dubbo: (application, registries, protocols, services, references, ...)",
	"registry":  `registries are named: write registries: {zk: {address: "zookeeper://127.0.0.1:2181"}}`,
	"protocol":  "protocols are named: write protocols: {dubbo: {port: 20880}}",
	"service":   "services are named: write services: {greeter: {interface: demo.Greeter}}",
	"reference": "references are named: write references: {greeter: {interface: demo.Greeter}}",
	"provider":  "services are named: write services: {greeter: {interface: demo.Greeter}}",
}

type movedKey struct {
	to      string // the new path, relative to the struct
	example string // the new place in YAML
}

// checkYAML walks the YAML document against Config before it is decoded,
// so that mistakes are reported in YAML terms: the path of the key
// (registries.zk.timeout) and its line, the nearest known key for an
// unknown one, the new place of a key that moved (movedKeys), and
// "durations need a unit" for a bare number where a duration goes. It
// returns one message per mistake.
func checkYAML(doc *yaml.Node) []string {
	var errs []string
	if doc == nil || len(doc.Content) == 0 {
		return nil
	}
	checkNode(doc.Content[0], reflect.TypeFor[Config](), "", &errs)
	return errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func checkNode(n *yaml.Node, t reflect.Type, path string, errs *[]string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		checkDuration(n, path, errs)
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode && !wholeNumber(n) {
			*errs = append(*errs, fmt.Sprintf("config: %s (line %d): %q is not a whole number", path, n.Line, n.Value))
		}
	case reflect.Bool:
		if n.Kind == yaml.ScalarNode && !yamlBool(n) {
			*errs = append(*errs, fmt.Sprintf("config: %s (line %d): %q is not true or false", path, n.Line, n.Value))
		}
	case reflect.Struct:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, wrongShape(n, t, path))
			return
		}
		fields := map[string]reflect.Type{}
		var known []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			fields[name] = f.Type
			known = append(known, name)
		}
		slices.Sort(known)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue
			}
			if m, ok := movedKeys[t][k.Value]; ok {
				*errs = append(*errs, fmt.Sprintf("config: %s (line %d): this key moved to %s (write %s)",
					join(path, k.Value), k.Line, join(path, m.to), m.example))
				continue
			}
			ft, ok := fields[k.Value]
			if !ok && path == "" && topLevelHints[k.Value] != "" {
				*errs = append(*errs, fmt.Sprintf("config: %s (line %d): unknown key; %s", k.Value, k.Line, topLevelHints[k.Value]))
				continue
			}
			if !ok && isList(fields[plural(k.Value)]) && v.Kind == yaml.ScalarNode {
				// registry: zk where registries: [zk] goes.
				*errs = append(*errs, fmt.Sprintf("config: %s (line %d): unknown key; %s takes a list: write %s: [%s]",
					join(path, k.Value), k.Line, plural(k.Value), plural(k.Value), flowValue(v.Value)))
				continue
			}
			if !ok {
				where := "top level"
				if path != "" {
					where = path
				}
				*errs = append(*errs, fmt.Sprintf("config: %s (line %d): unknown key%s (known in %s: %s)",
					join(path, k.Value), k.Line, suggest(k.Value, known), where, strings.Join(known, ", ")))
				continue
			}
			checkNode(v, ft, join(path, k.Value), errs)
		}
	case reflect.Map:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, wrongShape(n, t, path))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Kind == yaml.ScalarNode && !isNull(n) {
				*errs = append(*errs, fmt.Sprintf("config: %s (line %d): a list goes here: write %s: [%s]", path, n.Line, lastKey(path), flowValue(n.Value)))
			}
			return
		}
		for i, item := range n.Content {
			checkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

// wrongShape is the message for a value of the wrong shape where t, a
// struct or a map, goes (application: shop; registries: zookeeper://...):
// what goes there and how to write it, with the value given when it fits
// the main key (name, interface, address).
func wrongShape(n *yaml.Node, t reflect.Type, path string) string {
	got := "a list"
	val := "..."
	switch n.Kind {
	case yaml.ScalarNode:
		got, val = fmt.Sprintf("%q is a single value", n.Value), flowValue(n.Value)
	case yaml.MappingNode:
		got = "a map"
	}
	key := lastKey(path)
	if t.Kind() == reflect.Map {
		inner := "..."
		if e := t.Elem(); e.Kind() == reflect.Struct {
			inner = "{" + mainKey(e) + ": " + val + "}"
		}
		return fmt.Sprintf("config: %s (line %d): %s where named entries go: write %s: {NAME: %s}", path, n.Line, got, key, inner)
	}
	return fmt.Sprintf("config: %s (line %d): %s where keys go: write %s: {%s: %s} (keys: %s)",
		path, n.Line, got, key, mainKey(t), val, strings.Join(keysOf(t), ", "))
}

// mainKey is the key a struct is mostly written with.
func mainKey(t reflect.Type) string {
	keys := keysOf(t)
	for _, k := range []string{"name", "interface", "address"} {
		if slices.Contains(keys, k) {
			return k
		}
	}
	if len(keys) == 0 {
		return "..."
	}
	return keys[0]
}

// keysOf lists the YAML keys of struct t, sorted.
func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && name != "-" && name != "" {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

// lastKey is the last key of a path (references.greeter.registries ->
// registries).
func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// plural is the list key a singular one stands for: registry ->
// registries, filter -> filters.
func plural(key string) string {
	if s, ok := strings.CutSuffix(key, "y"); ok {
		return s + "ies"
	}
	return key + "s"
}

// isNull reports whether n is an empty value (key: with nothing after
// it), which the decoder takes as the zero value.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// flowValue writes v as it can stand in a YAML flow collection: quoted
// when it holds a character that would end or change it.
func flowValue(v string) string {
	if v == "" || strings.ContainsAny(v, ":,[]{}#&*!|>'\"%@` ") {
		return strconv.Quote(v)
	}
	return v
}

func isList(t reflect.Type) bool { return t != nil && t.Kind() == reflect.Slice }

// wholeNumber reports whether the scalar n decodes into an integer, as
// the decoder would take it, except a float with a fraction: the decoder
// would cut 1.5 to 1 without a word.
func wholeNumber(n *yaml.Node) bool {
	if n.Tag == "!!float" {
		var f float64
		return n.Decode(&f) == nil && f == math.Trunc(f)
	}
	var i int64
	return n.Decode(&i) == nil
}

// yamlBool reports whether the scalar n decodes into a bool, as the
// decoder would take it (true, false, YAML 1.1's yes/no/on/off, empty).
func yamlBool(n *yaml.Node) bool {
	var b bool
	return n.Decode(&b) == nil
}

func checkDuration(n *yaml.Node, path string, errs *[]string) {
	if n.Kind != yaml.ScalarNode {
		return
	}
	switch n.Tag {
	case "!!int", "!!float":
		if n.Value == "0" {
			return // zero needs no unit
		}
		*errs = append(*errs, fmt.Sprintf("config: %s (line %d): %s is not a duration: durations need a unit, such as %ss or %sms",
			path, n.Line, n.Value, n.Value, n.Value))
	case "!!str":
		if _, err := time.ParseDuration(n.Value); err != nil {
			*errs = append(*errs, fmt.Sprintf("config: %s (line %d): %q is not a duration (such as 2s, 500ms, 1m30s)", path, n.Line, n.Value))
		}
	}
}
