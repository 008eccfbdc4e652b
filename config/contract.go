package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/proxy"
)

// Contract modes of ReferenceConfig.Contract.
const (
	ContractFail = "fail"
	ContractWarn = "warn"
	ContractOff  = "off"
)

var contractModes = []string{ContractFail, ContractWarn, ContractOff}

// checkContract compares stub with the signatures of the providers the
// reference lists now (a.mu held); see ReferenceConfig.Contract.
func (a *Application) checkContract(id string, rc ReferenceConfig, ref *reference, stub any) error {
	if stub == nil || ref.dir == nil || rc.Contract == ContractOff {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	for _, inv := range ref.dir.Snapshot().Invokers() {
		u := inv.URL()
		sig := u.Param(proxy.KeySignatures, "")
		if sig == "" || seen[sig] {
			continue
		}
		seen[sig] = true
		if err := proxy.CheckStub(stub, u); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	err := fmt.Errorf("config: refer %s: %w (set references.%s.contract: warn to call anyway)", id, errors.Join(errs...), id)
	if rc.Contract == ContractWarn {
		a.log.Warn("stub does not match the provider's methods; calls to the mismatched methods will fail",
			zap.String("reference", id), zap.Error(err))
		return nil
	}
	return err
}

// checkMethodsKeys reports keys of references.<id>.methods that name no
// method of stub, with the nearest one.
func (a *Application) checkMethodsKeys(id string, stub any) error {
	rc, ok := a.cfg.References[id]
	if !ok || len(rc.Methods) == 0 {
		return nil
	}
	sigs, err := proxy.StubMethods(stub)
	if err != nil {
		return nil // proxy.Refer reports it
	}
	names := make([]string, len(sigs))
	for i, s := range sigs {
		names[i] = s.Name
	}
	slices.Sort(names)
	var bad []string
	for _, m := range sortedKeys(rc.Methods) {
		if !slices.Contains(names, m) {
			bad = append(bad, fmt.Sprintf("config: references.%s.methods.%s: the stub has no method %q%s (methods: %s)",
				id, m, m, suggest(m, names), strings.Join(names, ", ")))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "\n"))
	}
	return nil
}

// Providers returns the URLs of the providers the reference id lists now
// (through its registries, or its url), for tools that show what a
// provider offers (proxy.KeySignatures). It returns nil for an id not
// referred yet.
func (a *Application) Providers(id string) []*protocol.URL {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.refs {
		if r.id != id {
			continue
		}
		var out []*protocol.URL
		if r.dir != nil {
			for _, inv := range r.dir.Snapshot().Invokers() {
				out = append(out, inv.URL())
			}
		}
		for _, inv := range r.direct {
			out = append(out, inv.URL())
		}
		return out
	}
	return nil
}

// scratchStub returns a new zero value of stub's struct type when stub
// is a non-nil pointer to a struct, else stub itself (for proxy.Refer to
// reject).
func scratchStub(stub any) any {
	v := reflect.ValueOf(stub)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return stub
	}
	return reflect.New(v.Elem().Type()).Interface()
}

// copyFuncs copies the exported func fields of src into dst (same struct
// type), into embedded structs too, leaving other fields alone.
func copyFuncs(dst, src reflect.Value) {
	if dst.Kind() != reflect.Struct || dst.Type() != src.Type() {
		return
	}
	for i := range dst.NumField() {
		sf := dst.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch sf.Type.Kind() {
		case reflect.Func:
			if !src.Field(i).IsNil() {
				dst.Field(i).Set(src.Field(i))
			}
		case reflect.Struct:
			if sf.Anonymous {
				copyFuncs(dst.Field(i), src.Field(i))
			}
		}
	}
}
