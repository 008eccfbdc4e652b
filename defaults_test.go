package minidubbo_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/cluster"
	"github.com/minidubbo/minidubbo/cluster/loadbalance"
	"github.com/minidubbo/minidubbo/config"
	"github.com/minidubbo/minidubbo/exchange"
	"github.com/minidubbo/minidubbo/monitor"
	"github.com/minidubbo/minidubbo/monitor/server"
	"github.com/minidubbo/minidubbo/monitor/store"
	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/protocol/dubbo"
	"github.com/minidubbo/minidubbo/registry"
	"github.com/minidubbo/minidubbo/registry/zookeeper"
	"github.com/minidubbo/minidubbo/serialize"
	"github.com/minidubbo/minidubbo/transport"
)

// parseFramework parses the non-test Go files of the framework packages
// (the layers and their subpackages; not examples, cmd, internal or bench)
// and calls f for each, with the package's path relative to the module.
func parseFramework(t *testing.T, f func(pkg string, file *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && layerOf(modulePath+path) == "" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(filepath.Dir(path)), file)
		return nil
	})
	require.NoError(t, err)
}

// TestDefaultsDeclaredOnce fails when two packages declare a default of
// the same name with a value of their own: the higher layer must refer to
// the lower one's constant (dubbo.DefaultHeartbeat = exchange.DefaultHeartbeat)
// so that the two cannot drift apart.
func TestDefaultsDeclaredOnce(t *testing.T) {
	owners := map[string][]string{} // default name -> packages declaring a value
	refs := 0
	parseFramework(t, func(pkg string, file *ast.File) {
		imported := map[string]bool{}
		for _, im := range file.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if !strings.HasPrefix(p, modulePath) {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imported[name] = true
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Default") || !n.IsExported() || i >= len(vs.Values) {
						continue
					}
					// A value that names a framework package's identifier
					// refers to that package's default; anything else
					// (literals, time.Second, local constants) declares one.
					ref := false
					ast.Inspect(vs.Values[i], func(x ast.Node) bool {
						if sel, ok := x.(*ast.SelectorExpr); ok {
							if id, ok := sel.X.(*ast.Ident); ok && imported[id.Name] {
								ref = true
							}
						}
						return !ref
					})
					if ref {
						refs++
						continue
					}
					owners[n.Name] = append(owners[n.Name], pkg)
				}
			}
		}
	})
	require.Greater(t, refs, 5, "the scan sees the references between layers")
	require.Contains(t, owners, "DefaultMaxPayload", "the scan sees declarations")
	for name, pkgs := range owners {
		if len(pkgs) > 1 {
			slices.Sort(pkgs)
			t.Errorf("%s is declared with its own value in %s: declare it once, in the lowest layer, and refer to it from the others", name, strings.Join(pkgs, ", "))
		}
	}
	require.Equal(t, []string{"transport"}, owners["DefaultMaxPayload"])
	require.Equal(t, []string{"exchange"}, owners["DefaultHeartbeat"])
	require.Equal(t, []string{"registry/zookeeper"}, owners["DefaultSessionTimeout"])
	require.Equal(t, []string{"cluster"}, owners["DefaultRetries"])
}

// noDefaults lists the option structs that have no Default...() because
// they hold no defaults to state, with the reason.
var noDefaults = map[string]string{
	"registry.Options":         "each registry has its own defaults (zookeeper.DefaultOptions)",
	"cluster.ConditionOptions": "every zero is the setting itself (no force, priority 0, no consumer)",
}

// TestEveryOptionsHasDefaultAndValidate walks the framework's option
// structs (types named Options, ...Options or Limits): each has a
// Default...() function returning it and a Validate() error method.
func TestEveryOptionsHasDefaultAndValidate(t *testing.T) {
	types := map[string]bool{}
	funcs := map[string]bool{}    // "pkg.Func"
	validate := map[string]bool{} // "pkg.Type"
	parseFramework(t, func(pkg string, file *ast.File) {
		short := pkg[strings.LastIndex(pkg, "/")+1:]
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					if _, ok := ts.Type.(*ast.StructType); ok && (strings.HasSuffix(ts.Name.Name, "Options") || strings.HasSuffix(ts.Name.Name, "Limits")) {
						types[short+"."+ts.Name.Name] = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil {
					funcs[short+"."+d.Name.Name] = true
					continue
				}
				if d.Name.Name != "Validate" {
					continue
				}
				recv := d.Recv.List[0].Type
				if st, ok := recv.(*ast.StarExpr); ok {
					recv = st.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					validate[short+"."+id.Name] = true
				}
			}
		}
	})
	require.Contains(t, types, "transport.Options", "the scan sees the option structs")
	for typ := range types {
		if _, ok := noDefaults[typ]; ok {
			continue
		}
		pkg, name, _ := strings.Cut(typ, ".")
		def := pkg + ".Default" + name
		if name == "Options" {
			def = pkg + ".DefaultOptions"
		}
		if !funcs[def] {
			t.Errorf("%s has no %s()", typ, def)
		}
		if !validate[typ] {
			t.Errorf("%s has no Validate method", typ)
		}
	}
}

// The rule, layer by layer: the zero value and the defaults are valid, a
// negative field is an error that names it.
func TestZeroAndNegativeMeanTheSameInEveryLayer(t *testing.T) {
	send := func(o monitor.ReporterOptions) monitor.ReporterOptions {
		o.Send = func(context.Context, *monitor.Report) error { return nil }
		return o
	}
	for _, l := range []struct {
		layer          string
		zero, defaults error
		negative       error
		field          string
	}{
		{"transport", (&transport.Options{}).Validate(), ptr(transport.DefaultOptions()).Validate(), (&transport.Options{FrameTimeout: -1}).Validate(), "FrameTimeout"},
		{"exchange", (&exchange.Options{}).Validate(), ptr(exchange.DefaultOptions()).Validate(), (&exchange.Options{Heartbeat: -1}).Validate(), "Heartbeat"},
		{"protocol/dubbo", (&dubbo.Options{}).Validate(), ptr(dubbo.DefaultOptions()).Validate(), (&dubbo.Options{Connections: -1}).Validate(), "Connections"},
		{"serialize", serialize.Limits{}.Validate(), serialize.DefaultLimits().Validate(), serialize.Limits{AllocSlack: -1}.Validate(), "AllocSlack"},
		{"serialize map limits", serialize.MapLimits{}.Validate(), serialize.DefaultMapLimits().Validate(), serialize.MapLimits{MaxValue: -1}.Validate(), "MaxValue"},
		{"monitor", send(monitor.ReporterOptions{}).Validate(), send(monitor.DefaultReporterOptions()).Validate(), send(monitor.ReporterOptions{BufferBytes: -1}).Validate(), "BufferBytes"},
		{"monitor/server", server.Options{}.Validate(), server.DefaultOptions().Validate(), server.Options{Refresh: -1}.Validate(), "Refresh"},
		{"monitor/store", store.Options{}.Validate(), store.DefaultOptions().Validate(), store.Options{Retention: -1}.Validate(), "Retention"},
		{"cluster", cluster.Options{}.Validate(), cluster.DefaultOptions().Validate(), cluster.Options{Forks: -1}.Validate(), "Forks"},
		{"cluster/loadbalance", loadbalance.Options{}.Validate(), loadbalance.DefaultOptions().Validate(), loadbalance.Options{ProbeAfter: -1}.Validate(), "ProbeAfter"},
		{"registry", registry.Options{}.Validate(), nil, registry.Options{SessionTimeout: -1}.Validate(), "SessionTimeout"},
		{"registry/zookeeper", ptr(zookeeper.Options{}).Validate(), ptr(zookeeper.DefaultOptions()).Validate(), ptr(zookeeper.Options{Resync: -1}).Validate(), "Resync"},
	} {
		t.Run(l.layer, func(t *testing.T) {
			require.NoError(t, l.zero, "the zero value means the defaults")
			require.NoError(t, l.defaults)
			require.ErrorContains(t, l.negative, l.field+" -1", "a negative field is an error naming it")
			require.ErrorContains(t, l.negative, "negative")
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestConfigResolvesTheLayersDefaults: what config fills in for a setting
// left out of the YAML is the lower layer's default, not a copy of it.
func TestConfigResolvesTheLayersDefaults(t *testing.T) {
	c, err := config.Parse(strings.NewReader(`
registries:
  zk: {address: "zookeeper://127.0.0.1:2181"}
services:
  greeter: {interface: demo.Greeter}
references:
  greeter: {interface: demo.Greeter}
monitor:
  registries: [zk]
`))
	require.NoError(t, err)
	cd := cluster.DefaultOptions()
	ref := c.References["greeter"]
	require.Equal(t, cd.Retries, *ref.Retries)
	require.Equal(t, cd.LoadBalance, ref.LoadBalance)
	require.Equal(t, cd.Strategy, ref.Cluster)
	require.Equal(t, protocol.DefaultTimeout, ref.Timeout)
	require.Equal(t, protocol.DefaultTimeout, c.Services["greeter"].Timeout)
	require.Zero(t, c.Registries["zk"].ZooKeeper.SessionTimeout, "left to the registry, which applies its own default")
	require.Equal(t, zookeeper.DefaultOptions().SessionTimeout, time.Duration(config.DefaultSessionTimeout))
	require.Equal(t, monitor.DefaultReporterOptions().Interval, c.Monitor.Interval)
	p := c.Protocols[config.DefaultProtocol]
	require.Equal(t, dubbo.Name, p.Name)
	require.Equal(t, protocol.NewURL("dubbo", "h", 1, "x", nil).Serialization(), p.Serialization)
	require.Contains(t, serialize.Builtin().Names(), p.Serialization)

	// And down the stack: one payload limit, one heartbeat, one
	// connection bound.
	td, ed, dd := transport.DefaultOptions(), exchange.DefaultOptions(), dubbo.DefaultOptions()
	require.Equal(t, td.MaxPayload, ed.MaxPayload)
	require.Equal(t, td.MaxPayload, dd.MaxPayload)
	require.Equal(t, ed.Heartbeat, dd.Heartbeat)
	require.Equal(t, ed.Workers, dd.Workers)
	require.Equal(t, ed.Queue, dd.Queue)
	require.Equal(t, td.MaxConns, ed.MaxConns)
	require.Equal(t, td.MaxConns, dd.MaxConnections)
	require.Equal(t, td.FrameTimeout, dd.FrameTimeout)
	require.Equal(t, td.MaxQueue, ed.MaxQueue)
	require.Equal(t, td.MaxQueue, dd.MaxQueue)
	require.Equal(t, serialize.DefaultMapLimits(), dd.Attachments)
}
